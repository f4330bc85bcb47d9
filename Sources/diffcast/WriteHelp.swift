import Foundation

/// `diffcast OP --help` for a write op: its usage line and the words after the collection, laid
/// out as ArgumentParser lays out options. (`RequestBuilder` reads those words itself, since
/// their order means something that ArgumentParser's options would lose.) ASCII only: help2man
/// writes each byte of any other character as `?`.
struct WriteHelp {
    /// The options that place what a write op adds or moves.
    enum Anchor {
        case none
        /// `--section S`: where appended items go.
        case section
        /// `--before X` or `--after X`: a sibling (an item or a section) of what is inserted or
        /// moved.
        case beforeAfter(String)
    }

    let op: String
    let shape: WriteShape
    let anchor: Anchor

    var usage: String {
        let words: String
        switch shape {
        case .entries: words = " [<id> ...] [--id <id> [--data <key=value> ...]] ..."
        case .identifiers: words = " <id> ..."
        case .move: words = " <id>"
        case .collectionOnly: words = ""
        case .arguments: words = " (<json-object> | -)"
        }
        let anchors =
            switch anchor {
            case .none: ""
            case .section: " [--section <section>]"
            case .beforeAfter: " (--before <id> | --after <id>)"
            }
        let object = if case .entries = shape { " [<json-object> | -]" } else { "" }
        return "diffcast \(op) <collection>\(words)\(anchors)\(object) [<options>]"
    }

    func discussion(example: String) -> String {
        let rows = wordRows + anchorRows + objectRows
        let table = rows.isEmpty ? "" : "After the collection:\n" + Self.columns(rows) + "\n\n"
        return table + "Example:\n  $ \(example)"
    }

    private var wordRows: [(String, String)] {
        switch shape {
        case .entries(let key):
            [
                ("<id> ...", "\(key.capitalized) without data, one per word."),
                ("--id <id>", "One of the \(key); the --data or --data-json after it gives its data."),
                (
                    "--data <key=value> ...",
                    "The data of the last --id, an object: key=string and key:=json words (title=Hi likes:=0),"
                        + " up to the next option."
                ),
                ("--data-json <json>", "The data of the last --id, any one JSON value."),
            ]
        case .identifiers(let key): [("<id> ...", "The \(key), one per word (or --id <id> each).")]
        case .move(let key): [("<id>", "The \(key) to move.")]
        case .collectionOnly, .arguments: []
        }
    }

    private var anchorRows: [(String, String)] {
        switch anchor {
        case .none: []
        case .section: [("--section <section>", "The section to append to (default: the last one).")]
        case .beforeAfter(let sibling):
            [("--before <id>", "Before this \(sibling)."), ("--after <id>", "After this \(sibling).")]
        }
    }

    private var objectRows: [(String, String)] {
        let key: String
        switch shape {
        case .entries(let entries): key = entries
        case .arguments(let arguments): key = arguments
        case .identifiers, .move, .collectionOnly: return []
        }
        return [
            ("<json-object>", "The request's arguments as a JSON object, e.g. '{\"\(key)\":[...]}'."),
            ("-", "The same JSON object, read from standard input."),
        ]
    }

    /// Terms and descriptions in two columns, descriptions wrapped at 80 columns (a term too wide
    /// for its column puts its description on the next line).
    static func columns(_ rows: [(term: String, description: String)]) -> String {
        let indent = String(repeating: " ", count: 26)
        var lines: [String] = []
        for row in rows {
            let term = "  " + row.term
            let wrapped = wrap(row.description, width: 80 - indent.count)
            if term.count + 2 <= indent.count {
                lines.append(term.padding(toLength: indent.count, withPad: " ", startingAt: 0) + wrapped[0])
            } else {
                lines.append(term)
                lines.append(indent + wrapped[0])
            }
            lines += wrapped.dropFirst().map { indent + $0 }
        }
        return lines.joined(separator: "\n")
    }

    /// The words of `text` in lines of at most `width` characters (a longer word has its own line).
    static func wrap(_ text: String, width: Int) -> [String] {
        var lines: [String] = []
        var line = ""
        for word in text.split(separator: " ") {
            if !line.isEmpty && line.count + 1 + word.count > width {
                lines.append(line)
                line = ""
            }
            line += line.isEmpty ? String(word) : " " + word
        }
        return lines + [line]
    }
}

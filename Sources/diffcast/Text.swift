import DiffcastClient
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Colour for a terminal, nothing otherwise (or with NO_COLOR set, or TERM=dumb).
struct Style {
    let enabled: Bool

    static let forStandardOutput: Style = {
        let environment = ProcessInfo.processInfo.environment
        return Style(
            enabled: isatty(STDOUT_FILENO) == 1 && environment["NO_COLOR"] == nil
                && (environment["TERM"] ?? "dumb") != "dumb")
    }()

    private func paint(_ code: String, _ text: String) -> String {
        enabled ? "\u{1B}[\(code)m\(text)\u{1B}[0m" : text
    }

    func bold(_ text: String) -> String { paint("1", text) }
    func green(_ text: String) -> String { paint("32", text) }
    func red(_ text: String) -> String { paint("31", text) }
    func yellow(_ text: String) -> String { paint("33", text) }
    func cyan(_ text: String) -> String { paint("36", text) }
    func dim(_ text: String) -> String { paint("2", text) }
}

/// Readable renderings of values, states and changesets.
enum Text {
    /// A string without quotes, anything else as compact JSON.
    static func plain(_ value: JSONValue) -> String {
        if case .string(let text) = value { return text }
        return value.canonicalText
    }

    /// Rows of cells, columns padded to their widest cell.
    static func table(_ rows: [[String]]) -> String {
        let widths = rows.reduce(into: [Int]()) { widths, row in
            for (column, cell) in row.enumerated() {
                if column == widths.count { widths.append(0) }
                widths[column] = max(widths[column], cell.count)
            }
        }
        return rows.map { row in
            row.enumerated().map { column, cell in
                column == row.count - 1 ? cell : cell + String(repeating: " ", count: widths[column] - cell.count)
            }.joined(separator: "  ")
        }.joined(separator: "\n")
    }

    static func data(_ data: JSONText?) -> String { data.map { " " + $0.text } ?? "" }

    /// Sections and items, one per line, at most `limit` items.
    static func outline(_ sections: [SectionOutline], style: Style, limit: Int = .max) -> [String] {
        var lines: [String] = []
        var shown = 0
        let total = sections.reduce(0) { $0 + $1.items.count }
        for (sectionIndex, section) in sections.enumerated() {
            lines.append("[\(sectionIndex)] \(style.bold(section.id.text))\(data(section.data))")
            for (itemIndex, item) in section.items.enumerated() {
                guard shown < limit else { break }
                shown += 1
                lines.append("  [\(sectionIndex),\(itemIndex)] \(item.id.text)\(data(item.data))")
            }
        }
        if shown < total { lines.append(style.dim("  … \(total - shown) more items")) }
        return lines
    }

    /// One line per change: `+ [0,3] t9 {"likes":1}`, `~ [0,0] t1 likes 1000→2000`,
    /// `↕ t4 [0,5]→[1,0]`, `- [0,2] t2`, `⟳ [0,1] t3`; sections the same with `section`.
    /// `previous` gives an updated item's old data (to show what changed in it).
    static func changes(
        _ changeset: Changeset, previous: (Identifier) -> JSONText?, style: Style
    ) -> [String] {
        var lines: [String] = []
        let sections = changeset.sections
        for entry in sections.deleted { lines.append(style.red("- section \(entry.id) [\(entry.at)]")) }
        for entry in sections.inserted {
            lines.append(style.green("+ section \(entry.id) [\(entry.at)]\(data(entry.data))"))
        }
        for entry in sections.moved { lines.append(style.cyan("↕ section \(entry.id) [\(entry.from)]→[\(entry.to)]")) }
        for entry in sections.updated {
            lines.append(style.yellow("~ section \(entry.id) [\(entry.at)]\(data(entry.data))"))
        }
        for entry in sections.reloaded { lines.append(style.yellow("⟳ section \(entry.id) [\(entry.at)]")) }
        let items = changeset.items
        for entry in items.deleted { lines.append(style.red("- \(entry.at) \(entry.id)")) }
        for entry in items.inserted { lines.append(style.green("+ \(entry.at) \(entry.id)\(data(entry.data))")) }
        for entry in items.moved { lines.append(style.cyan("↕ \(entry.id) \(entry.from)→\(entry.to)")) }
        for entry in items.updated {
            let change = dataChange(from: previous(entry.id), to: entry.data)
            lines.append(style.yellow("~ \(entry.at) \(entry.id) \(change)"))
        }
        for entry in items.reloaded { lines.append(style.yellow("⟳ \(entry.at) \(entry.id)")) }
        return lines
    }

    /// `likes 1000→2000, title "a"→"b"` between two objects; `old→new` between other values.
    static func dataChange(from old: JSONText?, to new: JSONText?) -> String {
        let oldValue = old.flatMap { try? JSONParser.parse(Array($0.text.utf8)) }
        let newValue = new.flatMap { try? JSONParser.parse(Array($0.text.utf8)) }
        guard case .object(let before) = oldValue, case .object(let after) = newValue else {
            return "\(old?.text ?? "null")→\(new?.text ?? "null")"
        }
        var parts: [String] = []
        for member in after {
            let earlier = before.first { $0.key == member.key }?.value
            if earlier != member.value {
                parts.append("\(member.key) \(earlier?.canonicalText ?? "∅")→\(member.value.canonicalText)")
            }
        }
        for member in before where !after.contains(where: { $0.key == member.key }) {
            parts.append("\(member.key) \(member.value.canonicalText)→∅")
        }
        return parts.isEmpty ? "(same data, reconfigured)" : parts.joined(separator: ", ")
    }
}

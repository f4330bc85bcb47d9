import ArgumentParser
import DiffcastClient
import Foundation

/// What a write op's words after the collection mean.
enum WriteShape {
    /// Entries under `key` (`items` or `sections`): a bare word or `--id X` starts one,
    /// `--data k=v k:=json...` or `--data-json JSON` gives it data.
    case entries(String)
    /// Identifiers under `key`: each bare word or `--id X`.
    case identifiers(String)
    /// The item or section under `key` to move, then `--before X` or `--after X`.
    case move(String)
    /// Nothing but the collection (and a JSON object, when wanted).
    case collectionOnly
    /// The collection and a JSON object of arguments, whose main one is `key` (`batch`'s `ops`).
    case arguments(String)
}

/// A write op as a command: builds the request from its words, sends it, prints the answer.
///
/// The words are parsed here rather than by ArgumentParser because their order means something
/// (`--data` belongs to the `--id` before it); `WriteHelp` documents them in `OP --help`.
protocol WriteCommand: AsyncParsableCommand {
    static var op: String { get }
    static var shape: WriteShape { get }
    var options: ConnectionOptions { get }
    var words: [String] { get }
    /// What a successful answer says (without `--json`).
    static func summary(of response: JSONValue, collection: String) -> String
}

extension WriteCommand {
    /// The op's configuration, its usage and its words documented (see `WriteHelp`).
    static func describe(_ abstract: String, anchor: WriteHelp.Anchor = .none, example: String)
        -> CommandConfiguration
    {
        let help = WriteHelp(op: op, shape: shape, anchor: anchor)
        return CommandConfiguration(
            commandName: op, abstract: abstract, usage: help.usage, discussion: help.discussion(example: example))
    }

    static func summary(of response: JSONValue, collection: String) -> String {
        "ok, version \(Text.plain(response["version"] ?? .null))"
    }

    func run() async throws {
        let request = try RequestBuilder.build(op: Self.op, shape: Self.shape, words: words)
        let collection = request["collection"].map(Text.plain) ?? ""
        try await options.session { connection in
            options.show(try await connection.call(request)) { Self.summary(of: $0, collection: collection) }
        }
    }
}

/// Turns `COLLECTION [WORDS…]` into a request: bare words, `--id`, `--data` with HTTPie's
/// `key=string` / `key:=json`, anchors (`--section`, `--before`, `--after`), a JSON object, or
/// `-` for a JSON object on standard input. The words are read left to right; what they built so
/// far is the builder's state.
struct RequestBuilder {
    let op: String
    let shape: WriteShape
    let standardInput: () -> Data
    private var collection: String?
    /// The request's arguments, by key (a later word sets a key again).
    private var arguments: [JSONValue.Member] = []
    /// The entries of `.entries` shapes, each an object with its `id` (and `data`).
    private var entries: [[JSONValue.Member]] = []
    private var identifiers: [JSONValue] = []
    private var moved: String?
    /// After `--data`, up to the next option: `key=value` words go into the entry's data.
    private var inData = false

    static func build(
        op: String, shape: WriteShape, words: [String], standardInput: @escaping () -> Data = readStandardInput
    ) throws -> JSONValue {
        var builder = RequestBuilder(op: op, shape: shape, standardInput: standardInput)
        var remaining = words[...]
        while let word = remaining.popFirst() {
            try builder.take(word) { option in
                guard let value = remaining.popFirst() else { throw ValidationError("\(option) needs a value") }
                return value
            }
        }
        return try builder.request()
    }

    private init(op: String, shape: WriteShape, standardInput: @escaping () -> Data) {
        self.op = op
        self.shape = shape
        self.standardInput = standardInput
    }

    /// Reads one word; `value` takes the word after an option that needs one.
    private mutating func take(_ word: String, value: (String) throws -> String) throws {
        switch word {
        case "--id":
            inData = false
            try addBare(try value(word))
        case "--data":
            guard case .entries = shape, !entries.isEmpty else { throw ValidationError("--data follows an --id") }
            inData = true
            let current = entries[entries.count - 1].first { $0.key == "data" }?.value
            if case .object = current {} else { try setData(.object([])) }
        case "--data-json":
            inData = false
            try setData(try Self.parse(try value(word), what: "--data-json"))
        case "--section", "--before", "--after", "--item":
            inData = false
            Self.set(String(word.dropFirst(2)), .string(try value(word)), in: &arguments)
        case "-":
            try merge(try Self.parse(standardInput(), what: "standard input"), from: "standard input")
        default:
            try takeWord(word)
        }
    }

    /// A word that is no option: the collection first, then a JSON object, a `key=value`, or a
    /// bare identifier.
    private mutating func takeWord(_ word: String) throws {
        if collection == nil, !word.hasPrefix("-"), !word.hasPrefix("{") {
            collection = word
        } else if word.hasPrefix("{") {
            try merge(try Self.parse(Data(word.utf8), what: "the JSON argument"), from: "the JSON argument")
        } else if word.hasPrefix("--") {
            throw ValidationError("unknown option '\(word)'")
        } else if inData {
            guard let pair = try Self.keyValue(word) else { throw Self.notData(word, shape: shape) }
            try addData(pair)
        } else if let pair = try Self.keyValue(word) {
            Self.set(pair.key, pair.value, in: &arguments)
        } else {
            try addBare(word)
        }
    }

    /// The request the words built.
    private func request() throws -> JSONValue {
        guard let collection else { throw ValidationError("name the collection first: diffcast \(op) COLLECTION …") }
        var arguments = arguments
        var request: [JSONValue.Member] = [.init("op", .string(op)), .init("collection", .string(collection))]
        switch shape {
        case .entries(let key) where !entries.isEmpty:
            Self.set(key, .array(entries.map { .object($0) }), in: &arguments)
        case .identifiers(let key) where !identifiers.isEmpty:
            Self.set(key, .array(identifiers), in: &arguments)
        case .move(let key):
            if let moved { Self.set(key, .string(moved), in: &arguments) }
        default:
            break
        }
        for member in arguments { Self.set(member.key, member.value, in: &request) }
        return .object(request)
    }

    private static func set(_ key: String, _ value: JSONValue, in members: inout [JSONValue.Member]) {
        if let existing = members.firstIndex(where: { $0.key == key }) {
            members[existing].value = value
        } else {
            members.append(.init(key, value))
        }
    }

    private mutating func setData(_ data: JSONValue) throws {
        guard !entries.isEmpty else { throw ValidationError("data before any --id") }
        Self.set("data", data, in: &entries[entries.count - 1])
    }

    private mutating func addData(_ pair: JSONValue.Member) throws {
        guard case .object(var members) = entries.last?.first(where: { $0.key == "data" })?.value else {
            throw ValidationError("--data holds key=value pairs")
        }
        Self.set(pair.key, pair.value, in: &members)
        try setData(.object(members))
    }

    private mutating func merge(_ object: JSONValue, from source: String) throws {
        guard case .object(let members) = object else {
            throw ValidationError("\(source) must be a JSON object of the request's arguments")
        }
        for member in members { Self.set(member.key, member.value, in: &arguments) }
    }

    private mutating func addBare(_ word: String) throws {
        switch shape {
        case .entries:
            entries.append([.init("id", .string(word))])
        case .identifiers:
            identifiers.append(.string(word))
        case .move:
            guard moved == nil else { throw ValidationError("one \(op) moves one thing; '\(word)' is extra") }
            moved = word
        case .collectionOnly, .arguments:
            throw ValidationError("\(op) takes no '\(word)'")
        }
    }

    /// A word after `--data` that is no `key=value`: a forgotten `=` would otherwise make the
    /// word another entry (or an anchor) and leave the data empty.
    static func notData(_ word: String, shape: WriteShape) -> ValidationError {
        let noun = if case .entries("sections") = shape { "section" } else { "item" }
        return ValidationError(
            "--data takes key=string or key:=json words up to the next option, not '\(word)': "
                + "write \(word)=TEXT or \(word):=JSON (another \(noun) goes after --id)")
    }

    /// `key=text` (a string) or `key:=json`; nil when the word is neither.
    static func keyValue(_ word: String) throws -> JSONValue.Member? {
        guard let equals = word.firstIndex(of: "="), equals != word.startIndex else { return nil }
        let key = word[..<equals]
        let rest = String(word[word.index(after: equals)...])
        if key.hasSuffix(":") {
            return .init(String(key.dropLast()), try parse(Data(rest.utf8), what: "the value of \(key.dropLast())"))
        }
        return .init(String(key), .string(rest))
    }

    static func parse(_ text: String, what: String) throws -> JSONValue {
        try parse(Data(text.utf8), what: what)
    }

    static func parse(_ data: Data, what: String) throws -> JSONValue {
        do {
            return try JSONParser.parse(Array(data))
        } catch {
            throw ValidationError("\(what) is not JSON: \(error.message)")
        }
    }

    static func readStandardInput() -> Data {
        FileHandle.standardInput.readDataToEndOfFile()
    }
}

// MARK: - The write ops (SPEC.md's table), one command each

struct AppendSections: WriteCommand {
    static let op = "append_sections", shape = WriteShape.entries("sections")
    static let configuration = describe(
        "Append sections; their items come in JSON.",
        example: "diffcast append_sections feed today --id later --data title=Later")
    @OptionGroup var options: ConnectionOptions
    @Argument(parsing: .allUnrecognized, help: .hidden) var words: [String] = []
}

struct InsertSections: WriteCommand {
    static let op = "insert_sections", shape = WriteShape.entries("sections")
    static let configuration = describe(
        "Insert sections --before or --after a section.", anchor: .beforeAfter("section"),
        example: "diffcast insert_sections feed pinned --before today")
    @OptionGroup var options: ConnectionOptions
    @Argument(parsing: .allUnrecognized, help: .hidden) var words: [String] = []
}

struct DeleteSections: WriteCommand {
    static let op = "delete_sections", shape = WriteShape.identifiers("sections")
    static let configuration = describe(
        "Delete sections with their items.",
        example: "diffcast delete_sections feed later")
    @OptionGroup var options: ConnectionOptions
    @Argument(parsing: .allUnrecognized, help: .hidden) var words: [String] = []
}

struct ReloadSections: WriteCommand {
    static let op = "reload_sections", shape = WriteShape.identifiers("sections")
    static let configuration = describe(
        "Mark sections as reloaded.",
        example: "diffcast reload_sections feed today")
    @OptionGroup var options: ConnectionOptions
    @Argument(parsing: .allUnrecognized, help: .hidden) var words: [String] = []
}

struct MoveSection: WriteCommand {
    static let op = "move_section", shape = WriteShape.move("section")
    static let configuration = describe(
        "Move a section --before or --after another.", anchor: .beforeAfter("section"),
        example: "diffcast move_section feed pinned --after today")
    @OptionGroup var options: ConnectionOptions
    @Argument(parsing: .allUnrecognized, help: .hidden) var words: [String] = []
}

struct UpdateSections: WriteCommand {
    static let op = "update_sections", shape = WriteShape.entries("sections")
    static let configuration = describe(
        "Set sections' data.",
        example: "diffcast update_sections feed --id today --data title=Today")
    @OptionGroup var options: ConnectionOptions
    @Argument(parsing: .allUnrecognized, help: .hidden) var words: [String] = []
}

struct AppendItems: WriteCommand {
    static let op = "append_items", shape = WriteShape.entries("items")
    static let configuration = describe(
        "Append items to the last section, or to --section.", anchor: .section,
        example: "diffcast append_items feed t1 --id t2 --data title=Hi likes:=0")
    @OptionGroup var options: ConnectionOptions
    @Argument(parsing: .allUnrecognized, help: .hidden) var words: [String] = []
}

struct InsertItems: WriteCommand {
    static let op = "insert_items", shape = WriteShape.entries("items")
    static let configuration = describe(
        "Insert items --before or --after an item.", anchor: .beforeAfter("item"),
        example: "diffcast insert_items feed --id t0 --data title=First --before t1")
    @OptionGroup var options: ConnectionOptions
    @Argument(parsing: .allUnrecognized, help: .hidden) var words: [String] = []
}

struct DeleteItems: WriteCommand {
    static let op = "delete_items", shape = WriteShape.identifiers("items")
    static let configuration = describe(
        "Delete items.",
        example: "diffcast delete_items feed t0")
    @OptionGroup var options: ConnectionOptions
    @Argument(parsing: .allUnrecognized, help: .hidden) var words: [String] = []
}

struct ReloadItems: WriteCommand {
    static let op = "reload_items", shape = WriteShape.identifiers("items")
    static let configuration = describe(
        "Mark items as reloaded.",
        example: "diffcast reload_items feed t1")
    @OptionGroup var options: ConnectionOptions
    @Argument(parsing: .allUnrecognized, help: .hidden) var words: [String] = []
}

struct ReconfigureItems: WriteCommand {
    static let op = "reconfigure_items", shape = WriteShape.identifiers("items")
    static let configuration = describe(
        "Mark items as reconfigured (listed as updated, data unchanged).",
        example: "diffcast reconfigure_items feed t1")
    @OptionGroup var options: ConnectionOptions
    @Argument(parsing: .allUnrecognized, help: .hidden) var words: [String] = []
}

struct MoveItem: WriteCommand {
    static let op = "move_item", shape = WriteShape.move("item")
    static let configuration = describe(
        "Move an item --before or --after another.", anchor: .beforeAfter("item"),
        example: "diffcast move_item feed t2 --before t1")
    @OptionGroup var options: ConnectionOptions
    @Argument(parsing: .allUnrecognized, help: .hidden) var words: [String] = []
}

struct UpdateItems: WriteCommand {
    static let op = "update_items", shape = WriteShape.entries("items")
    static let configuration = describe(
        "Set items' data.",
        example: "diffcast update_items feed --id t1 --data likes:=2000")
    @OptionGroup var options: ConnectionOptions
    @Argument(parsing: .allUnrecognized, help: .hidden) var words: [String] = []
}

struct DeleteAll: WriteCommand {
    static let op = "delete_all", shape = WriteShape.collectionOnly
    static let configuration = describe(
        "Delete every section and item.",
        example: "diffcast delete_all feed")
    @OptionGroup var options: ConnectionOptions
    @Argument(parsing: .allUnrecognized, help: .hidden) var words: [String] = []
}

struct Drop: WriteCommand {
    static let op = "drop", shape = WriteShape.collectionOnly
    static let configuration = describe(
        "Remove the collection (subscribers are told).",
        example: "diffcast drop feed")
    @OptionGroup var options: ConnectionOptions
    @Argument(parsing: .allUnrecognized, help: .hidden) var words: [String] = []

    static func summary(of _: JSONValue, collection: String) -> String { "ok, dropped \(collection)" }
}

struct Batch: WriteCommand {
    static let op = "batch", shape = WriteShape.arguments("ops")
    static let configuration = describe(
        "Several writes, all or nothing, as {\"ops\":[...]} (or - for stdin).",
        example: "diffcast batch feed '{\"ops\":[{\"op\":\"delete_items\",\"items\":[\"t2\"]}]}'")
    @OptionGroup var options: ConnectionOptions
    @Argument(parsing: .allUnrecognized, help: .hidden) var words: [String] = []
}

struct Apply: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Replace a collection with the sections given; the daemon diffs.",
        discussion: """
            The sections come as {"sections":[...]} (what `diffcast get --json` prints will do) \
            or as the bare array [...]: on the command line, in a file, or on standard input.

              $ diffcast apply feed '{"sections":[{"id":"today","items":["t1","t2"]}]}'
              $ diffcast apply feed today.json
            """)
    @OptionGroup var options: ConnectionOptions
    @Argument(help: "The collection.") var collection: String
    @Argument(
        help: ArgumentHelp(
            "The sections as JSON, a file that holds them, or - for standard input.", valueName: "sections"))
    var source: String

    func run() async throws {
        let sections: JSONValue
        switch try RequestBuilder.parse(try content(), what: description) {
        case .array(let array): sections = .array(array)
        case let object where object["sections"] != nil: sections = object["sections"] ?? .null
        default: throw ValidationError("\(description) holds neither {\"sections\":[...]} nor an array of sections")
        }
        try await options.session { connection in
            let response = try await connection.call([
                "op": "apply", "collection": .string(collection), "sections": sections,
            ])
            options.show(response) { "ok, version \(Text.plain($0["version"] ?? .null))" }
        }
    }

    /// Whether `source` is the JSON itself rather than a file's name.
    private var isInlineJSON: Bool { source.first == "{" || source.first == "[" }

    /// The source in words, for messages.
    private var description: String {
        isInlineJSON ? "the sections argument" : source == "-" ? "standard input" : source
    }

    private func content() throws -> Data {
        if isInlineJSON { return Data(source.utf8) }
        if source == "-" { return RequestBuilder.readStandardInput() }
        guard let data = FileManager.default.contents(atPath: source) else {
            let reason = FileManager.default.fileExists(atPath: source) ? "cannot read it" : "no such file"
            throw ValidationError(
                "\(source): \(reason) (give the sections as JSON, a file that holds them, or - for standard input)")
        }
        return data
    }
}

import ArgumentParser
import DiffcastClient
import Foundation

/// What a write op's words after the collection mean.
enum WriteShape {
    /// Entries under `key` (`items` or `sections`): a bare word or `--id X` starts one,
    /// `--data k=v k:=json…` or `--data-json JSON` gives it data.
    case entries(String)
    /// Identifiers under `key`: each bare word or `--id X`.
    case identifiers(String)
    /// The item or section under `key` to move, then `--before X` or `--after X`.
    case move(String)
    /// Nothing but the collection (and a JSON object, when wanted).
    case collectionOnly
}

/// A write op as a command: builds the request from its words, sends it, prints the answer.
protocol WriteCommand: AsyncParsableCommand {
    static var op: String { get }
    static var shape: WriteShape { get }
    var options: ConnectionOptions { get }
    var words: [String] { get }
}

extension WriteCommand {
    static func describe(_ abstract: String) -> CommandConfiguration {
        CommandConfiguration(commandName: op, abstract: abstract)
    }

    func run() async throws {
        let request = try RequestBuilder.build(op: Self.op, shape: Self.shape, words: words)
        try await options.session { connection in
            options.show(try await connection.call(request)) { response in
                "ok, version \(Text.plain(response["version"] ?? .null))"
            }
        }
    }
}

/// Turns `COLLECTION [WORDS…]` into a request: bare words, `--id`, `--data` with HTTPie's
/// `key=string` / `key:=json`, anchors (`--section`, `--before`, `--after`), a JSON object, or
/// `-` for a JSON object on standard input.
enum RequestBuilder {
    static func build(op: String, shape: WriteShape, words: [String], standardInput: () -> Data = readStandardInput)
        throws -> JSONValue
    {
        var collection: String?
        var arguments: [JSONValue.Member] = []
        var entries: [[JSONValue.Member]] = []
        var identifiers: [JSONValue] = []
        var moved: String?
        var inData = false
        var index = 0

        func value(after option: String) throws -> String {
            index += 1
            guard index < words.count else { throw ValidationError("\(option) needs a value") }
            return words[index]
        }
        func set(_ key: String, _ value: JSONValue, in members: inout [JSONValue.Member]) {
            if let existing = members.firstIndex(where: { $0.key == key }) {
                members[existing].value = value
            } else {
                members.append(.init(key, value))
            }
        }
        func setData(_ data: JSONValue) throws {
            guard !entries.isEmpty else { throw ValidationError("data before any --id") }
            set("data", data, in: &entries[entries.count - 1])
        }
        func merge(_ object: JSONValue, from source: String) throws {
            guard case .object(let members) = object else {
                throw ValidationError("\(source) must be a JSON object of the request's arguments")
            }
            for member in members { set(member.key, member.value, in: &arguments) }
        }
        func addBare(_ word: String) throws {
            switch shape {
            case .entries:
                entries.append([.init("id", .string(word))])
            case .identifiers:
                identifiers.append(.string(word))
            case .move:
                guard moved == nil else { throw ValidationError("one \(op) moves one thing; '\(word)' is extra") }
                moved = word
            case .collectionOnly:
                throw ValidationError("\(op) takes no '\(word)'")
            }
        }

        while index < words.count {
            let word = words[index]
            defer { index += 1 }
            switch word {
            case "--id":
                inData = false
                try addBare(try value(after: word))
            case "--data":
                guard case .entries = shape, !entries.isEmpty else { throw ValidationError("--data follows an --id") }
                inData = true
                let current = entries[entries.count - 1].first { $0.key == "data" }?.value
                if case .object = current {} else { try setData(.object([])) }
            case "--data-json":
                inData = false
                try setData(try parse(try value(after: word), what: "--data-json"))
            case "--section", "--before", "--after", "--item":
                inData = false
                set(String(word.dropFirst(2)), .string(try value(after: word)), in: &arguments)
            case "-":
                try merge(try parse(standardInput(), what: "standard input"), from: "standard input")
            default:
                if collection == nil, !word.hasPrefix("-"), !word.hasPrefix("{") {
                    collection = word
                } else if word.hasPrefix("{") {
                    try merge(try parse(Data(word.utf8), what: "the JSON argument"), from: "the JSON argument")
                } else if word.hasPrefix("--") {
                    throw ValidationError("unknown option '\(word)'")
                } else if let pair = try keyValue(word) {
                    if inData {
                        guard
                            case .object(var members) = entries[entries.count - 1].first(where: { $0.key == "data" })?
                                .value
                        else { throw ValidationError("--data holds key=value pairs") }
                        set(pair.key, pair.value, in: &members)
                        try setData(.object(members))
                    } else {
                        set(pair.key, pair.value, in: &arguments)
                    }
                } else {
                    inData = false
                    try addBare(word)
                }
            }
        }
        guard let collection else { throw ValidationError("name the collection first: diffcast \(op) COLLECTION …") }
        var request: [JSONValue.Member] = [.init("op", .string(op)), .init("collection", .string(collection))]
        switch shape {
        case .entries(let key) where !entries.isEmpty:
            set(key, .array(entries.map { .object($0) }), in: &arguments)
        case .identifiers(let key) where !identifiers.isEmpty:
            set(key, .array(identifiers), in: &arguments)
        case .move(let key):
            if let moved { set(key, .string(moved), in: &arguments) }
        default:
            break
        }
        for member in arguments { set(member.key, member.value, in: &request) }
        return .object(request)
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
    static let configuration = describe("Append sections (ids; --id S --data k=v for data; items in JSON).")
    @OptionGroup var options: ConnectionOptions
    @Argument(parsing: .allUnrecognized) var words: [String] = []
}

struct InsertSections: WriteCommand {
    static let op = "insert_sections", shape = WriteShape.entries("sections")
    static let configuration = describe("Insert sections --before or --after a section.")
    @OptionGroup var options: ConnectionOptions
    @Argument(parsing: .allUnrecognized) var words: [String] = []
}

struct DeleteSections: WriteCommand {
    static let op = "delete_sections", shape = WriteShape.identifiers("sections")
    static let configuration = describe("Delete sections with their items.")
    @OptionGroup var options: ConnectionOptions
    @Argument(parsing: .allUnrecognized) var words: [String] = []
}

struct ReloadSections: WriteCommand {
    static let op = "reload_sections", shape = WriteShape.identifiers("sections")
    static let configuration = describe("Mark sections as reloaded.")
    @OptionGroup var options: ConnectionOptions
    @Argument(parsing: .allUnrecognized) var words: [String] = []
}

struct MoveSection: WriteCommand {
    static let op = "move_section", shape = WriteShape.move("section")
    static let configuration = describe("Move a section --before or --after another.")
    @OptionGroup var options: ConnectionOptions
    @Argument(parsing: .allUnrecognized) var words: [String] = []
}

struct UpdateSections: WriteCommand {
    static let op = "update_sections", shape = WriteShape.entries("sections")
    static let configuration = describe("Set sections' data: --id S --data k=v k:=json …")
    @OptionGroup var options: ConnectionOptions
    @Argument(parsing: .allUnrecognized) var words: [String] = []
}

struct AppendItems: WriteCommand {
    static let op = "append_items", shape = WriteShape.entries("items")
    static let configuration = describe("Append items to the last section, or to --section S.")
    @OptionGroup var options: ConnectionOptions
    @Argument(parsing: .allUnrecognized) var words: [String] = []
}

struct InsertItems: WriteCommand {
    static let op = "insert_items", shape = WriteShape.entries("items")
    static let configuration = describe("Insert items --before or --after an item.")
    @OptionGroup var options: ConnectionOptions
    @Argument(parsing: .allUnrecognized) var words: [String] = []
}

struct DeleteItems: WriteCommand {
    static let op = "delete_items", shape = WriteShape.identifiers("items")
    static let configuration = describe("Delete items.")
    @OptionGroup var options: ConnectionOptions
    @Argument(parsing: .allUnrecognized) var words: [String] = []
}

struct ReloadItems: WriteCommand {
    static let op = "reload_items", shape = WriteShape.identifiers("items")
    static let configuration = describe("Mark items as reloaded.")
    @OptionGroup var options: ConnectionOptions
    @Argument(parsing: .allUnrecognized) var words: [String] = []
}

struct ReconfigureItems: WriteCommand {
    static let op = "reconfigure_items", shape = WriteShape.identifiers("items")
    static let configuration = describe("Mark items as reconfigured (listed as updated, data unchanged).")
    @OptionGroup var options: ConnectionOptions
    @Argument(parsing: .allUnrecognized) var words: [String] = []
}

struct MoveItem: WriteCommand {
    static let op = "move_item", shape = WriteShape.move("item")
    static let configuration = describe("Move an item --before or --after another.")
    @OptionGroup var options: ConnectionOptions
    @Argument(parsing: .allUnrecognized) var words: [String] = []
}

struct UpdateItems: WriteCommand {
    static let op = "update_items", shape = WriteShape.entries("items")
    static let configuration = describe("Set items' data: --id I --data k=v k:=json …")
    @OptionGroup var options: ConnectionOptions
    @Argument(parsing: .allUnrecognized) var words: [String] = []
}

struct DeleteAll: WriteCommand {
    static let op = "delete_all", shape = WriteShape.collectionOnly
    static let configuration = describe("Delete every section and item.")
    @OptionGroup var options: ConnectionOptions
    @Argument(parsing: .allUnrecognized) var words: [String] = []
}

struct Drop: WriteCommand {
    static let op = "drop", shape = WriteShape.collectionOnly
    static let configuration = describe("Remove the collection (subscribers are told).")
    @OptionGroup var options: ConnectionOptions
    @Argument(parsing: .allUnrecognized) var words: [String] = []
}

struct Batch: WriteCommand {
    static let op = "batch", shape = WriteShape.collectionOnly
    static let configuration = describe("Several writes, all or nothing: '{\"ops\":[…]}' or - for stdin.")
    @OptionGroup var options: ConnectionOptions
    @Argument(parsing: .allUnrecognized) var words: [String] = []
}

struct Apply: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Replace a collection with the sections in a file (or - for stdin); the daemon diffs.",
        discussion: "The file holds {\"sections\":[…]} or just the array of sections.")
    @OptionGroup var options: ConnectionOptions
    @Argument(help: "The collection.") var collection: String
    @Argument(help: "A JSON file, or - for standard input.") var file: String

    func run() async throws {
        let content: Data
        if file == "-" {
            content = RequestBuilder.readStandardInput()
        } else {
            guard let data = FileManager.default.contents(atPath: file) else {
                throw ValidationError("cannot read \(file)")
            }
            content = data
        }
        let sections: JSONValue
        switch try RequestBuilder.parse(content, what: file) {
        case .array(let array): sections = .array(array)
        case let object where object["sections"] != nil: sections = object["sections"] ?? .null
        default: throw ValidationError("\(file) holds neither {\"sections\":[…]} nor an array of sections")
        }
        try await options.session { connection in
            let response = try await connection.call([
                "op": "apply", "collection": .string(collection), "sections": sections,
            ])
            options.show(response) { "ok, version \(Text.plain($0["version"] ?? .null))" }
        }
    }
}

import DiffcastWire
import Yams

/// One setting of `diffcastd`, described once: its key in the configuration file, its
/// command-line option, where its value lives in `DaemonSettings` (which holds the default), the
/// values it accepts, whether SIGHUP applies it, and its help. The file's decoding, the options,
/// `--help`, the check of every value and the restart notice of a reload all follow from
/// `DaemonSettings.all`.
public struct Setting: Sendable {
    /// When a changed value takes effect.
    public enum Applies: Sendable, Equatable {
        /// At SIGHUP, without dropping a connection.
        case onReload
        /// Only after a restart; a reload that changes it logs the key.
        case afterRestart
    }

    /// The key in `config/diffcastd.yaml`, e.g. `max_line_bytes`.
    public let key: String
    public let applies: Applies
    /// One line for `--help`.
    public let help: String
    let value: Value

    /// The option that sets it, e.g. `--max-line-bytes`.
    public var option: String { "--" + String(key.map { $0 == "_" ? "-" : $0 }) }

    init(_ key: String, _ value: Value, _ applies: Applies, _ help: String) {
        self.key = key
        self.value = value
        self.applies = applies
        self.help = help
    }

    /// Where a setting's value lives, and what it accepts.
    /// Unchecked: `WritableKeyPath` is not `Sendable`, but these are literals to stored properties,
    /// immutable once made, and `all` is never changed.
    enum Value: @unchecked Sendable {
        /// A whole number within `range` (`Int.max`: no upper bound).
        case integer(WritableKeyPath<DaemonSettings, Int>, ClosedRange<Int>)
        /// One of `choices`.
        case choice(WritableKeyPath<DaemonSettings, String>, choices: [String])
        /// Any text (a path).
        case text(WritableKeyPath<DaemonSettings, String>)
        /// Text or nothing (`null`), in the given form when set.
        case optionalText(WritableKeyPath<DaemonSettings, String?>, TextForm)
        /// A list: a YAML sequence in the file, comma-separated as an option.
        case list(WritableKeyPath<DaemonSettings, [String]>)
        /// `true` or `false`.
        case flag(WritableKeyPath<DaemonSettings, Bool>)
        /// A `diffcast` claim: a YAML mapping in the file, or its JSON text.
        case rights(WritableKeyPath<DaemonSettings, String?>)
    }

    /// What a set optional text must look like.
    enum TextForm: Sendable {
        case any
        case nonEmpty
        /// `HOST:PORT`, with an example for the error.
        case address(example: String)
    }
}

// MARK: - Reading a value

extension Setting {
    /// Sets the value from the file; `null` keeps the default.
    func read(_ node: Node, into settings: inout DaemonSettings) throws(SettingsError) {
        if node.null != nil { return }
        switch value {
        case .integer(let path, _):
            guard let number = node.int else { throw mismatch("a whole number", node) }
            settings[keyPath: path] = number
        case .choice(let path, _), .text(let path):
            guard let text = node.scalar?.string else { throw mismatch("text", node) }
            settings[keyPath: path] = text
        case .optionalText(let path, _):
            guard let text = node.scalar?.string else { throw mismatch("text", node) }
            settings[keyPath: path] = text
        case .list(let path):
            guard let items = node.sequence else { throw mismatch("a list of text", node) }
            let texts = items.compactMap { $0.scalar?.string }
            guard texts.count == items.count else { throw mismatch("a list of text", node) }
            settings[keyPath: path] = texts
        case .flag(let path):
            guard let flag = node.bool else { throw mismatch("true or false", node) }
            settings[keyPath: path] = flag
        case .rights(let path):
            if node.mapping != nil {
                do {
                    settings[keyPath: path] = try YAMLDecoder().decode(RightsYAML.self, from: node).json
                } catch {
                    throw SettingsError("'\(key)': \(error)")
                }
            } else if let text = node.scalar?.string {
                settings[keyPath: path] = text
            } else {
                throw mismatch("a mapping of rights or its JSON text", node)
            }
        }
    }

    /// Sets the value from its option's argument.
    func read(option argument: String, into settings: inout DaemonSettings) throws(SettingsError) {
        switch value {
        case .integer(let path, _):
            guard let number = Int(argument) else { throw optionMismatch("a whole number", argument) }
            settings[keyPath: path] = number
        case .choice(let path, _), .text(let path):
            settings[keyPath: path] = argument
        case .optionalText(let path, _), .rights(let path):
            settings[keyPath: path] = argument
        case .list(let path):
            settings[keyPath: path] = argument.split(separator: ",").map(String.init)
        case .flag(let path):
            guard let flag = Bool(argument) else { throw optionMismatch("true or false", argument) }
            settings[keyPath: path] = flag
        }
    }

    private func mismatch(_ expected: String, _ node: Node) -> SettingsError {
        let found = node.scalar.map { "'\($0.string)'" } ?? (node.sequence != nil ? "a list" : "a mapping")
        return SettingsError("'\(key)' must be \(expected), got \(found)")
    }

    private func optionMismatch(_ expected: String, _ argument: String) -> SettingsError {
        SettingsError("\(option): expected \(expected), got '\(argument)'")
    }
}

// MARK: - Checking, comparing and showing a value

extension Setting {
    /// Refuses a value outside what the setting accepts, naming the key and the accepted values.
    func check(_ settings: DaemonSettings) throws(SettingsError) {
        switch value {
        case .integer(let path, let range):
            let number = settings[keyPath: path]
            guard !range.contains(number) else { return }
            let accepted =
                range.upperBound == .max ? "at least \(range.lowerBound)" : "\(range.lowerBound) to \(range.upperBound)"
            throw SettingsError("\(key): \(accepted), got \(number)")
        case .choice(let path, let choices):
            guard !choices.contains(settings[keyPath: path]) else { return }
            let listed = choices.dropLast().joined(separator: ", ") + " or " + (choices.last ?? "")
            throw SettingsError("\(key): expected \(listed), got '\(settings[keyPath: path])'")
        case .optionalText(let path, .nonEmpty):
            if settings[keyPath: path]?.isEmpty == true { throw SettingsError("\(key): must not be empty") }
        case .optionalText(let path, .address(let example)):
            guard let address = settings[keyPath: path] else { return }
            let port = address.split(separator: ":").last.flatMap { UInt16($0) }
            guard address.contains(":"), let port, port > 0, !address.hasPrefix(":") else {
                throw SettingsError("\(key): expected IP:PORT (e.g. \(example)), got '\(address)'")
            }
        case .optionalText(_, .any), .text, .list, .flag, .rights:
            return
        }
    }

    /// Whether two configurations hold different values for this setting.
    func differs(_ old: DaemonSettings, _ new: DaemonSettings) -> Bool {
        switch value {
        case .integer(let path, _): old[keyPath: path] != new[keyPath: path]
        case .choice(let path, _), .text(let path): old[keyPath: path] != new[keyPath: path]
        case .optionalText(let path, _), .rights(let path): old[keyPath: path] != new[keyPath: path]
        case .list(let path): old[keyPath: path] != new[keyPath: path]
        case .flag(let path): old[keyPath: path] != new[keyPath: path]
        }
    }

    /// The value as the file would write it (`null` for none), for `--help`'s defaults.
    func shown(in settings: DaemonSettings) -> String {
        switch value {
        case .integer(let path, _): "\(settings[keyPath: path])"
        case .choice(let path, _), .text(let path): settings[keyPath: path]
        case .optionalText(let path, _), .rights(let path): settings[keyPath: path] ?? "null"
        case .list(let path): "[" + settings[keyPath: path].joined(separator: ", ") + "]"
        case .flag(let path): "\(settings[keyPath: path])"
        }
    }

    /// The placeholder of the option's argument in `--help`.
    var argumentName: String {
        switch value {
        case .integer: key.hasSuffix("_ms") ? "ms" : key.hasSuffix("_bytes") ? "bytes" : key.hasSuffix("_s") ? "s" : "n"
        case .choice(_, let choices): choices.joined(separator: "|")
        case .text, .optionalText(_, .any), .optionalText(_, .nonEmpty): "text"
        case .optionalText(_, .address): "host:port"
        case .list: "a,b,…"
        case .flag: "true|false"
        case .rights: "json"
        }
    }
}

/// `auth_anonymous` written as a YAML mapping, turned into the claim's JSON text.
struct RightsYAML: Decodable {
    let json: String

    private enum Keys: String, CodingKey, CaseIterable {
        case read, write, drop, admin
    }

    private struct AnyKey: CodingKey {
        let stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Keys.self)
        for key in try decoder.container(keyedBy: AnyKey.self).allKeys where Keys(rawValue: key.stringValue) == nil {
            throw SettingsError("unknown right '\(key.stringValue)' (expected read, write, drop or admin)")
        }
        var members: [JSONValue.Member] = []
        for key in [Keys.read, .write, .drop] {
            if let patterns = try container.decodeIfPresent([String].self, forKey: key) {
                members.append(.init(key.rawValue, .array(patterns.map(JSONValue.string))))
            }
        }
        if let admin = try container.decodeIfPresent(Bool.self, forKey: .admin) {
            members.append(.init("admin", .bool(admin)))
        }
        var output = JSONOutput()
        output.append(.object(members))
        json = String(decoding: output.bytes, as: UTF8.self)
    }
}

import DiffcastCore

/// A pattern of collection names (SPEC.md "Scoped access"): names split at `.` into tokens, and
/// the pattern matches token by token, where `*` matches exactly one token and a last `>` one or
/// more. Anything else matches only itself, so `news.>` matches `news.eu` and `news.eu.fr`, not
/// `news`.
public struct CollectionPattern: Sendable, Hashable, CustomStringConvertible {
    enum Token: Sendable, Hashable {
        case literal([UInt8])
        case anyOne
        case rest
    }

    let tokens: [Token]
    public let description: String
    /// Whether every token is a literal (no `*`, no `>`): the pattern then matches one name,
    /// its own text, and a request is checked by one comparison of bytes.
    private let isName: Bool

    /// Parses a pattern; nil (with the reason) when it is empty, has an empty token, or a `>`
    /// that is not last.
    public init(parsing text: String) throws(PatternError) {
        guard !text.isEmpty, text.utf8.count <= 128 else {
            throw PatternError(pattern: text, reason: "a pattern is 1 to 128 bytes")
        }
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        var tokens: [Token] = []
        for (index, part) in parts.enumerated() {
            switch part {
            case "": throw PatternError(pattern: text, reason: "a token between dots is empty")
            case "*": tokens.append(.anyOne)
            case ">":
                guard index == parts.count - 1 else {
                    throw PatternError(pattern: text, reason: "'>' may only be the last token")
                }
                tokens.append(.rest)
            default: tokens.append(.literal(Array(part.utf8)))
            }
        }
        self.tokens = tokens
        self.description = text
        isName = tokens.allSatisfy { if case .literal = $0 { true } else { false } }
    }

    /// Whether the pattern matches the collection name. A pattern without wildcards is compared
    /// whole; another walks the name's bytes once. Neither allocates: every request of a
    /// token's holder is checked against its patterns.
    public func matches(_ name: String) -> Bool {
        if isName { return UTF8Bytes.equal(name, description) }
        var name = name
        return name.withUTF8 { bytes in
            var names = NameTokens(bytes: bytes)
            for token in tokens {
                switch token {
                case .rest:
                    return names.next() != nil
                case .anyOne:
                    guard names.next() != nil else { return false }
                case .literal(let literal):
                    guard let next = names.next(), next.elementsEqual(literal) else { return false }
                }
            }
            return names.next() == nil
        }
    }
}

/// The tokens of a collection name, split at every `.` (so `a..b` has an empty one).
private struct NameTokens {
    let bytes: UnsafeBufferPointer<UInt8>
    var start = 0
    var isExhausted = false

    init(bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
    }

    mutating func next() -> UnsafeBufferPointer<UInt8>.SubSequence? {
        guard !isExhausted else { return nil }
        var end = start
        while end < bytes.count && bytes[end] != UInt8(ascii: ".") { end += 1 }
        let token = bytes[start..<end]
        if end == bytes.count { isExhausted = true } else { start = end + 1 }
        return token
    }
}

/// A collection pattern that cannot be used, with the reason.
public struct PatternError: Error, CustomStringConvertible, Equatable {
    public let pattern: String
    public let reason: String
    public var description: String { "bad collection pattern '\(pattern)': \(reason)" }
}

/// A set of collection patterns: a name is in it when one of them matches.
public struct CollectionScope: Sendable, Hashable {
    public var patterns: [CollectionPattern]

    public init(_ patterns: [CollectionPattern] = []) {
        self.patterns = patterns
    }

    public var isEmpty: Bool { patterns.isEmpty }

    public func contains(_ name: String) -> Bool {
        patterns.contains { $0.matches(name) }
    }

    public func union(_ other: CollectionScope) -> CollectionScope {
        CollectionScope(patterns + other.patterns.filter { !patterns.contains($0) })
    }
}

/// What a holder may do with collections: the private claim `diffcast` of a token, and the
/// setting `auth_anonymous` (SPEC.md "Scoped access"). `admin` permits everything.
public struct Rights: Sendable, Hashable {
    /// `get`, `subscribe`, `window`, `unsubscribe`; `list` shows these.
    public var read = CollectionScope()
    /// Every write op, and creating a collection by subscribing.
    public var write = CollectionScope()
    /// `drop`.
    public var drop = CollectionScope()
    /// Everything, `stats` included.
    public var admin = false

    public init(
        read: CollectionScope = CollectionScope(), write: CollectionScope = CollectionScope(),
        drop: CollectionScope = CollectionScope(), admin: Bool = false
    ) {
        self.read = read
        self.write = write
        self.drop = drop
        self.admin = admin
    }

    /// No right at all.
    public static let none = Rights()

    /// One holder's rights joined with another's (a token's with the anonymous ones).
    public func union(_ other: Rights) -> Rights {
        Rights(
            read: read.union(other.read), write: write.union(other.write), drop: drop.union(other.drop),
            admin: admin || other.admin)
    }

    public var isNone: Bool { !admin && read.isEmpty && write.isEmpty && drop.isEmpty }

    /// Reads the claim object: `read`, `write`, `drop` (lists of patterns) and `admin`; any
    /// other key, or a value of another type, is an error naming it.
    public init(claim: JSONValue) throws(PatternError) {
        guard case .object(let members) = claim else {
            throw PatternError(pattern: "", reason: "the rights must be a JSON object")
        }
        for member in members {
            switch member.key {
            case "read", "write", "drop":
                guard case .array(let values) = member.value else {
                    throw PatternError(pattern: member.key, reason: "'\(member.key)' must be a list of patterns")
                }
                var patterns: [CollectionPattern] = []
                for value in values {
                    guard case .string(let text) = value else {
                        throw PatternError(pattern: member.key, reason: "'\(member.key)' must be a list of strings")
                    }
                    patterns.append(try CollectionPattern(parsing: text))
                }
                let scope = CollectionScope(patterns)
                switch member.key {
                case "read": read = scope
                case "write": write = scope
                default: drop = scope
                }
            case "admin":
                guard case .bool(let value) = member.value else {
                    throw PatternError(pattern: "admin", reason: "'admin' must be true or false")
                }
                admin = value
            default:
                throw PatternError(
                    pattern: member.key, reason: "unknown key '\(member.key)' (expected read, write, drop, admin)")
            }
        }
    }

    /// Reads the claim from its JSON text (a setting, a command-line option).
    public init(claimText: String) throws(PatternError) {
        let value: JSONValue
        do {
            value = try JSONParser.parse(Array(claimText.utf8), maximumDepth: 8)
        } catch {
            throw PatternError(pattern: claimText, reason: "not a JSON object")
        }
        try self.init(claim: value)
    }
}

import DiffcastCore

/// A parsed JSON value that keeps what Diffcast must not lose: the order of object keys and the
/// exact text of numbers.
public indirect enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    /// The number's text as it was written (already checked against JSON's grammar).
    case number(String)
    case string(String)
    case array([JSONValue])
    case object([Member])

    /// One key/value pair of an object, in the order written.
    public struct Member: Sendable, Equatable {
        public var key: String
        public var value: JSONValue

        public init(_ key: String, _ value: JSONValue) {
            self.key = key
            self.value = value
        }
    }

    /// The value of the first member named `key`, when this is an object.
    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.first { UTF8Bytes.equal($0.key, key) }?.value
    }

    /// Canonical compact JSON text of this value.
    public var canonicalText: String {
        var output = JSONOutput()
        output.append(self)
        return output.string
    }

    /// The value as Diffcast data: `nil` for JSON null, else its canonical text.
    public var asData: JSONText? {
        switch self {
        case .null: return nil
        case .number(let text): return JSONText(canonical: text)
        default:
            var output = JSONOutput(reservingCapacity: canonicalLength)
            output.append(self)
            return JSONText(canonical: output.string)
        }
    }

    /// The length in bytes of `canonicalText`, so that it is written into one allocation.
    var canonicalLength: Int {
        switch self {
        case .null: 4
        case .bool(let flag): flag ? 4 : 5
        case .number(let text): text.utf8.count
        case .string(let text): JSONOutput.escapedLength(of: text)
        case .array(let elements): elements.reduce(1 + max(1, elements.count)) { $0 + $1.canonicalLength }
        case .object(let members):
            members.reduce(1 + max(1, members.count)) {
                $0 + JSONOutput.escapedLength(of: $1.key) + 1 + $1.value.canonicalLength
            }
        }
    }
}

// Literals, so that clients write requests as they read: `["op": "get", "collection": "feed"]`.
// A dictionary literal keeps its keys in the order written.
extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .number(String(value)) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(nilLiteral: ()) { self = .null }

    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(elements.map { Member($0.0, $0.1) })
    }
}

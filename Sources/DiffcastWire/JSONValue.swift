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
        if case .null = self { return nil }
        return JSONText(canonical: canonicalText)
    }

    /// A JSON number written as an integer (no fraction, no exponent).
    var isIntegerNumber: Bool {
        guard case .number(let text) = self else { return false }
        return !text.utf8.contains { $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "e") || $0 == UInt8(ascii: "E") }
    }
}

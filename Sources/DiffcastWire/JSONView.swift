import DiffcastCore

#if canImport(Glibc)
    import Glibc
#endif

/// One value of a parsed JSON text, as `JSONParser` lists them: in the order they are written,
/// a container before what it holds, an object's members as key then value. It points into the
/// text, so reading a request allocates only what the request becomes.
struct JSONToken {
    enum Kind: UInt8 {
        case null, `false`, `true`, number
        /// A string; with escapes, its text must be decoded.
        case string, escapedString
        case array, object
    }

    var kind: Kind
    /// The text between `start` and `end` is the value's canonical text (as `JSONOutput`
    /// writes it): no white space, and every escape written the canonical way.
    var isCanonical: Bool
    /// The value's text in the source, a string's quotes included.
    var start: UInt32
    var end: UInt32
    /// An object's members or an array's elements.
    var count: UInt32
    /// The index of the token after this value and all it holds.
    var next: UInt32

    /// A string's text, decoded.
    func text(in source: UnsafeBufferPointer<UInt8>) -> String {
        guard kind == .escapedString else { return String(decoding: innerBytes(in: source), as: UTF8.self) }
        return String(decoding: decodedBytes(in: source), as: UTF8.self)
    }

    /// Whether two strings have the same text once decoded.
    func hasSameText(as other: JSONToken, in source: UnsafeBufferPointer<UInt8>) -> Bool {
        if kind == .string, other.kind == .string {
            return Self.bytesEqual(innerBytes(in: source), other.innerBytes(in: source))
        }
        return text(in: source).utf8.elementsEqual(other.text(in: source).utf8)
    }

    /// Whether a string's decoded text is `text`, compared as bytes.
    func hasText(_ text: String, in source: UnsafeBufferPointer<UInt8>) -> Bool {
        guard kind == .string else { return UTF8Bytes.equal(self.text(in: source), text) }
        let inner = innerBytes(in: source)
        return text.utf8.withContiguousStorageIfAvailable { Self.bytesEqual(inner, $0) }
            ?? inner.elementsEqual(text.utf8)
    }

    /// A string's bytes between its quotes, as written.
    private func innerBytes(in source: UnsafeBufferPointer<UInt8>) -> UnsafeBufferPointer<UInt8> {
        UnsafeBufferPointer(rebasing: source[(Int(start) + 1)..<(Int(end) - 1)])
    }

    /// A string's bytes with its escapes decoded, by reading it again.
    private func decodedBytes(in source: UnsafeBufferPointer<UInt8>) -> [UInt8] {
        var cursor = JSONParser.Cursor(bytes: source, maximumDepth: 0)
        cursor.position = Int(start)
        // The parser read this string once without error, so it reads it again the same way.
        try? cursor.parseString()
        return cursor.decoded
    }

    private static func bytesEqual(_ lhs: UnsafeBufferPointer<UInt8>, _ rhs: UnsafeBufferPointer<UInt8>) -> Bool {
        guard lhs.count == rhs.count else { return false }
        guard let left = lhs.baseAddress, let right = rhs.baseAddress else { return true }
        return memcmp(left, right, lhs.count) == 0
    }
}

/// A value inside a parsed JSON text, read without building a tree. Valid only inside the
/// closure that `JSONParser.withView` passes it to, like the buffer pointers it holds.
struct JSONView {
    let tokens: UnsafeBufferPointer<JSONToken>
    let source: UnsafeBufferPointer<UInt8>
    let index: Int

    private var token: JSONToken { tokens[index] }

    var kind: JSONToken.Kind { token.kind }
    var isNull: Bool { kind == .null }
    var isObject: Bool { kind == .object }

    /// A string's text; nil for other values.
    var string: String? { kind == .string || kind == .escapedString ? token.text(in: source) : nil }

    /// A number's text as written; nil for other values.
    var numberText: String? { kind == .number ? sourceText : nil }

    /// A JSON number written as an integer (no fraction, no exponent).
    var isIntegerNumber: Bool {
        kind == .number
            && !sourceBytes.contains { $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "e") || $0 == UInt8(ascii: "E") }
    }

    /// The value of the first member named `key` (compared as bytes), when this is an object.
    subscript(key: String) -> JSONView? {
        members.first { $0.key.token.hasText(key, in: source) }?.value
    }

    /// Whether this is a string whose text is `text`.
    func hasText(_ text: String) -> Bool {
        (kind == .string || kind == .escapedString) && token.hasText(text, in: source)
    }

    /// An array's elements in order; nil for other values.
    var elements: Children? {
        kind == .array ? Children(view: self, count: Int(token.count)) : nil
    }

    /// An object's members in order; none for other values.
    var members: Members {
        Members(view: self, count: kind == .object ? Int(token.count) : 0)
    }

    /// Canonical compact JSON text of this value: the source itself when it already is.
    var canonicalText: String {
        token.isCanonical ? sourceText : jsonValue.canonicalText
    }

    /// The value as Diffcast data: `nil` for JSON null, else its canonical text.
    var asData: JSONText? {
        isNull ? nil : JSONText(canonical: canonicalText)
    }

    /// The value as a tree.
    var jsonValue: JSONValue {
        switch kind {
        case .null: .null
        case .false: .bool(false)
        case .true: .bool(true)
        case .number: .number(sourceText)
        case .string, .escapedString: .string(token.text(in: source))
        case .array: .array(Children(view: self, count: Int(token.count)).map(\.jsonValue))
        case .object: .object(members.map { .init($0.key.token.text(in: source), $0.value.jsonValue) })
        }
    }

    private var sourceBytes: UnsafeBufferPointer<UInt8> {
        UnsafeBufferPointer(rebasing: source[Int(token.start)..<Int(token.end)])
    }

    private var sourceText: String { String(decoding: sourceBytes, as: UTF8.self) }

    private func view(at index: Int) -> JSONView {
        JSONView(tokens: tokens, source: source, index: index)
    }

    /// The elements of an array.
    struct Children: Sequence, IteratorProtocol {
        fileprivate let view: JSONView
        let count: Int
        private var nextIndex: Int
        private var remaining: Int

        fileprivate init(view: JSONView, count: Int) {
            self.view = view
            self.count = count
            self.nextIndex = view.index + 1
            self.remaining = count
        }

        mutating func next() -> JSONView? {
            guard remaining > 0 else { return nil }
            remaining -= 1
            defer { nextIndex = Int(view.tokens[nextIndex].next) }
            return view.view(at: nextIndex)
        }
    }

    /// The members of an object: each key (a string) and its value.
    struct Members: Sequence, IteratorProtocol {
        fileprivate let view: JSONView
        private var nextIndex: Int
        private var remaining: Int

        fileprivate init(view: JSONView, count: Int) {
            self.view = view
            self.nextIndex = view.index + 1
            self.remaining = count
        }

        mutating func next() -> (key: JSONView, value: JSONView)? {
            guard remaining > 0 else { return nil }
            remaining -= 1
            defer { nextIndex = Int(view.tokens[nextIndex + 1].next) }
            return (view.view(at: nextIndex), view.view(at: nextIndex + 1))
        }
    }
}

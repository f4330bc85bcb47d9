import DiffcastCore

/// Bytes of compact JSON under construction. Strings are escaped as Python's
/// `json.dumps(ensure_ascii=False)` does, so canonical text matches other implementations.
public struct JSONOutput: Sendable {
    public private(set) var bytes: [UInt8]

    public init(reservingCapacity capacity: Int = 256) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    public var string: String { String(decoding: bytes, as: UTF8.self) }

    /// Appends text that is already JSON (a key with its quotes, punctuation, canonical data).
    public mutating func appendRaw(_ text: StaticString) {
        bytes.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// Appends JSON text held in a `String` (labelled, so that a literal goes to the
    /// `StaticString` overload, which costs a copy and nothing more).
    public mutating func appendRaw(text: String) {
        // Copied as one block: appending the UTF-8 view byte by byte was most of encoding an
        // event's items.
        let copied: Void? = text.utf8.withContiguousStorageIfAvailable { bytes.append(contentsOf: $0) }
        if copied == nil { bytes.append(contentsOf: text.utf8) }
    }

    public mutating func appendRaw(_ data: JSONText) {
        appendRaw(text: data.text)
    }

    public mutating func appendByte(_ byte: UInt8) {
        bytes.append(byte)
    }

    /// Appends bytes that are already JSON (an encoded event).
    public mutating func appendRaw(bytes json: some Collection<UInt8>) {
        bytes.append(contentsOf: json)
    }

    public mutating func append(_ number: some BinaryInteger) {
        if let value = UInt64(exactly: number) {
            append(decimal: value)
        } else if let value = Int64(exactly: number), value < 0 {
            bytes.append(UInt8(ascii: "-"))
            append(decimal: value.magnitude)
        } else {
            appendRaw(text: String(number))
        }
    }

    /// The decimal digits of `value`, written without making a `String` (versions and indexes
    /// are written several times per event; the generic conversion was a tenth of publishing).
    private mutating func append(decimal value: UInt64) {
        if value < 10 { return bytes.append(UInt8(ascii: "0") + UInt8(value)) }
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)
        var count = 0
        var rest = value
        withUnsafeMutableBytes(of: &digits) { buffer in
            repeat {
                count += 1
                buffer[buffer.count - count] = UInt8(ascii: "0") + UInt8(rest % 10)
                rest /= 10
            } while rest > 0
            // Appended as typed bytes: a slice of raw bytes went through the generic,
            // byte-by-byte path.
            let written = UnsafeRawBufferPointer(rebasing: buffer[(buffer.count - count)...])
            bytes.append(contentsOf: written.assumingMemoryBound(to: UInt8.self))
        }
    }

    /// Data as a JSON value: `null` when absent.
    public mutating func append(data: JSONText?) {
        if let data { appendRaw(data) } else { appendRaw("null") }
    }

    public mutating func append(identifier: Identifier) {
        append(string: identifier.text)
    }

    public mutating func append(string: String) {
        bytes.append(UInt8(ascii: "\""))
        var text = string
        text.withUTF8 { utf8 in
            var runStart = 0
            for (index, byte) in utf8.enumerated() where byte < 0x20 || byte == 0x22 || byte == 0x5c {
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<index]))
                appendEscape(byte)
                runStart = index + 1
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart...]))
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// The length of `string` written by `append(string:)`, quotes included.
    static func escapedLength(of string: String) -> Int {
        var length = 2
        for byte in string.utf8 {
            switch byte {
            case 0x22, 0x5c, 0x0a, 0x0d, 0x09, 0x08, 0x0c: length += 2
            case 0..<0x20: length += 6
            default: length += 1
            }
        }
        return length
    }

    private mutating func appendEscape(_ byte: UInt8) {
        switch byte {
        case 0x22: appendRaw("\\\"")
        case 0x5c: appendRaw("\\\\")
        case 0x0a: appendRaw("\\n")
        case 0x0d: appendRaw("\\r")
        case 0x09: appendRaw("\\t")
        case 0x08: appendRaw("\\b")
        case 0x0c: appendRaw("\\f")
        default:
            let hex = String(byte, radix: 16)
            appendRaw(text: "\\u00" + (hex.count == 1 ? "0" + hex : hex))
        }
    }

    public mutating func append(_ value: JSONValue) {
        switch value {
        case .null: appendRaw("null")
        case .bool(let flag): flag ? appendRaw("true") : appendRaw("false")
        case .number(let text): appendRaw(text: text)
        case .string(let text): append(string: text)
        case .array(let elements):
            bytes.append(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                append(element)
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let members):
            bytes.append(UInt8(ascii: "{"))
            for (index, member) in members.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                append(string: member.key)
                bytes.append(UInt8(ascii: ":"))
                append(member.value)
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }
}

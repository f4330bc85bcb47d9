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
        // Copied as one block: appending the UTF-8 view byte by byte would be most of encoding
        // an event's items.
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
            appendWritten(maximumCount: ByteWriter.maximumDecimalLength) { $0.write(decimal: value) }
        } else if let value = Int64(exactly: number) {
            appendWritten(maximumCount: ByteWriter.maximumDecimalLength) { $0.write(value) }
        } else {
            appendRaw(text: String(number))
        }
    }

    /// Appends what `body` writes into `maximumCount` bytes of room on the stack, all at once.
    /// A changeset entry is a run of short pieces (brackets, keys, numbers, an identifier), and
    /// every `Array.append(contentsOf:)` has a fixed cost whatever it appends, which piece by
    /// piece would be most of an entry's.
    mutating func appendWritten(maximumCount: Int, _ body: (inout ByteWriter) -> Void) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: maximumCount) { room in
            var writer = ByteWriter(room)
            body(&writer)
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: room[..<writer.count]))
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
        appendWritten(maximumCount: ByteWriter.maximumQuotedLength(of: string)) { $0.write(quoted: string) }
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

/// Short pieces of JSON written into room that `JSONOutput.appendWritten` reserved. Each write
/// needs room its caller counted (`maximumDecimalLength`, `maximumQuotedLength(of:)`): running
/// past it is a mistake in that count, not something input can cause, and traps as an array
/// index out of range does.
struct ByteWriter {
    private let room: UnsafeMutableBufferPointer<UInt8>
    /// The bytes written so far.
    private(set) var count = 0

    init(_ room: UnsafeMutableBufferPointer<UInt8>) {
        self.room = room
    }

    /// The most bytes `write(decimal:)` or `write(_:)` writes: a sign and 19 digits, or 20.
    static let maximumDecimalLength = 20

    /// The most bytes `write(quoted:)` writes for `string`: quotes, and 6 per escaped byte.
    static func maximumQuotedLength(of string: String) -> Int { 2 + 6 * string.utf8.count }

    mutating func write(byte: UInt8) {
        room[count] = byte
        count += 1
    }

    /// Text that is already JSON.
    mutating func write(_ text: StaticString) {
        write(bytes: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    mutating func write(bytes: UnsafeBufferPointer<UInt8>) {
        let end = count + bytes.count
        _ = UnsafeMutableBufferPointer(rebasing: room[count..<end]).initialize(fromContentsOf: bytes)
        count = end
    }

    mutating func write(_ value: Int64) {
        if value < 0 { write(byte: UInt8(ascii: "-")) }
        write(decimal: value.magnitude)
    }

    mutating func write(_ value: Int) {
        write(Int64(value))
    }

    /// The decimal digits of `value`, without making a `String` (versions and indexes are
    /// written several times per event, and the generic conversion costs more): two digits a
    /// division, from a table of the hundred pairs, as most integer printers do.
    mutating func write(decimal value: UInt64) {
        var digits = 1
        var power: UInt64 = 10
        while digits < 20 && value >= power {
            digits += 1
            power &*= 10
        }
        var rest = value
        var index = count + digits
        let pairs = Self.digitPairs.utf8Start
        while rest >= 100 {
            let pair = Int(truncatingIfNeeded: rest % 100) &* 2
            rest /= 100
            index -= 2
            room[index] = pairs[pair]
            room[index + 1] = pairs[pair + 1]
        }
        if rest >= 10 {
            let pair = Int(truncatingIfNeeded: rest) &* 2
            room[index - 2] = pairs[pair]
            room[index - 1] = pairs[pair + 1]
        } else {
            room[index - 1] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: rest)
        }
        count += digits
    }

    /// "00" to "99", one after the other.
    private static let digitPairs: StaticString = """
        00010203040506070809101112131415161718192021222324252627282930313233343536373839\
        40414243444546474849505152535455565758596061626364656667686970717273747576777879\
        8081828384858687888990919293949596979899
        """

    /// `string` in quotes, escaped as Python's `json.dumps(ensure_ascii=False)` does, so that
    /// canonical text matches other implementations.
    mutating func write(quoted string: String) {
        write(byte: UInt8(ascii: "\""))
        var text = string
        text.withUTF8 { utf8 in
            var runStart = 0
            for (index, byte) in utf8.enumerated() where byte < 0x20 || byte == 0x22 || byte == 0x5c {
                write(bytes: UnsafeBufferPointer(rebasing: utf8[runStart..<index]))
                writeEscape(byte)
                runStart = index + 1
            }
            write(bytes: UnsafeBufferPointer(rebasing: utf8[runStart...]))
        }
        write(byte: UInt8(ascii: "\""))
    }

    private mutating func writeEscape(_ byte: UInt8) {
        switch byte {
        case 0x22: write("\\\"")
        case 0x5c: write("\\\\")
        case 0x0a: write("\\n")
        case 0x0d: write("\\r")
        case 0x09: write("\\t")
        case 0x08: write("\\b")
        case 0x0c: write("\\f")
        default:
            let hex: StaticString = "0123456789abcdef"
            write("\\u00")
            write(byte: hex.utf8Start[Int(byte >> 4)])
            write(byte: hex.utf8Start[Int(byte & 0x0f)])
        }
    }
}

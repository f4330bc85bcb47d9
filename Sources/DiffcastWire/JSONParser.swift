import DiffcastCore

/// A strict RFC 8259 parser over UTF-8 bytes with a nesting limit, so no input can exhaust the
/// stack. Errors are `parse_error`, or `limit_exceeded` for nesting past `maximumDepth`.
public struct JSONParser {
    public static let defaultMaximumDepth = 256

    /// Parses exactly one JSON value, surrounded by optional white space.
    public static func parse(
        _ bytes: some Collection<UInt8>, maximumDepth: Int = defaultMaximumDepth
    ) throws(DiffcastError) -> JSONValue {
        // Parsed in place when the bytes are contiguous (a request line is), copied otherwise.
        let parsed = bytes.withContiguousStorageIfAvailable { buffer in
            Result { () throws(DiffcastError) in try parseValue(in: buffer, maximumDepth: maximumDepth) }
        }
        if let parsed { return try parsed.get() }
        return try Array(bytes).withUnsafeBufferPointer { buffer throws(DiffcastError) in
            try parseValue(in: buffer, maximumDepth: maximumDepth)
        }
    }

    private static func parseValue(
        in buffer: UnsafeBufferPointer<UInt8>, maximumDepth: Int
    ) throws(DiffcastError) -> JSONValue {
        var parser = Cursor(bytes: buffer, maximumDepth: maximumDepth)
        parser.skipWhitespace()
        let value = try parser.parseValue(depth: 0)
        parser.skipWhitespace()
        guard parser.position == buffer.count else {
            throw .parseError(
                "unexpected '\(parser.describeCurrent())' after the JSON value at byte \(parser.position)")
        }
        return value
    }

    private struct Cursor {
        let bytes: UnsafeBufferPointer<UInt8>
        let maximumDepth: Int
        var position = 0

        init(bytes: UnsafeBufferPointer<UInt8>, maximumDepth: Int) {
            self.bytes = bytes
            self.maximumDepth = maximumDepth
        }

        func describeCurrent() -> String {
            guard position < bytes.count else { return "end of line" }
            let byte = bytes[position]
            return byte >= 0x20 && byte < 0x7f ? String(UnicodeScalar(byte)) : "\\x" + String(byte, radix: 16)
        }

        mutating func skipWhitespace() {
            while position < bytes.count {
                switch bytes[position] {
                case 0x20, 0x09, 0x0a, 0x0d: position += 1
                default: return
                }
            }
        }

        func error(_ what: String) -> DiffcastError {
            .parseError("\(what) at byte \(position) ('\(describeCurrent())')")
        }

        mutating func parseValue(depth: Int) throws(DiffcastError) -> JSONValue {
            guard position < bytes.count else { throw error("expected a value") }
            switch bytes[position] {
            case UInt8(ascii: "{"): return try parseObject(depth: depth + 1)
            case UInt8(ascii: "["): return try parseArray(depth: depth + 1)
            case UInt8(ascii: "\""): return .string(try parseString())
            case UInt8(ascii: "t"): try expectLiteral("true"); return .bool(true)
            case UInt8(ascii: "f"): try expectLiteral("false"); return .bool(false)
            case UInt8(ascii: "n"): try expectLiteral("null"); return .null
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
            default: throw error("expected a value")
            }
        }

        mutating func expectLiteral(_ literal: StaticString) throws(DiffcastError) {
            let count = literal.utf8CodeUnitCount
            guard position + count <= bytes.count else { throw error("bad literal") }
            let literalBytes = UnsafeBufferPointer(start: literal.utf8Start, count: count)
            for offset in 0..<count where bytes[position + offset] != literalBytes[offset] {
                throw error("bad literal")
            }
            position += count
        }

        mutating func checkDepth(_ depth: Int) throws(DiffcastError) {
            if depth > maximumDepth {
                throw .limitExceeded("JSON nested deeper than \(maximumDepth) levels")
            }
        }

        mutating func parseObject(depth: Int) throws(DiffcastError) -> JSONValue {
            try checkDepth(depth)
            position += 1
            var members: [JSONValue.Member] = []
            var seenKeys = Set<Identifier>()
            skipWhitespace()
            if position < bytes.count, bytes[position] == UInt8(ascii: "}") {
                position += 1
                return .object(members)
            }
            while true {
                skipWhitespace()
                guard position < bytes.count, bytes[position] == UInt8(ascii: "\"") else {
                    throw error("expected a string key")
                }
                let keyPosition = position
                let key = try parseString()
                // Keys compared as bytes; a scan for small objects, a set once they grow (no
                // quadratic cost for an object with many keys).
                let isDuplicate: Bool
                if members.count < 16 {
                    isDuplicate = members.contains { UTF8Bytes.equal($0.key, key) }
                } else {
                    if seenKeys.isEmpty { seenKeys = Set(members.map { Identifier($0.key) }) }
                    isDuplicate = !seenKeys.insert(Identifier(key)).inserted
                }
                if isDuplicate {
                    throw .parseError("duplicate key '\(key)' in one object at byte \(keyPosition)")
                }
                skipWhitespace()
                guard position < bytes.count, bytes[position] == UInt8(ascii: ":") else { throw error("expected ':'") }
                position += 1
                skipWhitespace()
                members.append(.init(key, try parseValue(depth: depth)))
                skipWhitespace()
                guard position < bytes.count else { throw error("unterminated object") }
                if bytes[position] == UInt8(ascii: ",") {
                    position += 1
                } else if bytes[position] == UInt8(ascii: "}") {
                    position += 1
                    return .object(members)
                } else {
                    throw error("expected ',' or '}'")
                }
            }
        }

        mutating func parseArray(depth: Int) throws(DiffcastError) -> JSONValue {
            try checkDepth(depth)
            position += 1
            var elements: [JSONValue] = []
            skipWhitespace()
            if position < bytes.count, bytes[position] == UInt8(ascii: "]") {
                position += 1
                return .array(elements)
            }
            while true {
                skipWhitespace()
                elements.append(try parseValue(depth: depth))
                skipWhitespace()
                guard position < bytes.count else { throw error("unterminated array") }
                if bytes[position] == UInt8(ascii: ",") {
                    position += 1
                } else if bytes[position] == UInt8(ascii: "]") {
                    position += 1
                    return .array(elements)
                } else {
                    throw error("expected ',' or ']'")
                }
            }
        }

        mutating func parseNumber() throws(DiffcastError) -> String {
            let start = position
            if bytes[position] == UInt8(ascii: "-") { position += 1 }
            guard position < bytes.count, isDigit(bytes[position]) else { throw error("bad number") }
            if bytes[position] == UInt8(ascii: "0") {
                position += 1
            } else {
                while position < bytes.count, isDigit(bytes[position]) { position += 1 }
            }
            if position < bytes.count, bytes[position] == UInt8(ascii: ".") {
                position += 1
                guard position < bytes.count, isDigit(bytes[position]) else { throw error("bad number") }
                while position < bytes.count, isDigit(bytes[position]) { position += 1 }
            }
            if position < bytes.count, bytes[position] == UInt8(ascii: "e") || bytes[position] == UInt8(ascii: "E") {
                position += 1
                if position < bytes.count, bytes[position] == UInt8(ascii: "+") || bytes[position] == UInt8(ascii: "-")
                {
                    position += 1
                }
                guard position < bytes.count, isDigit(bytes[position]) else { throw error("bad number") }
                while position < bytes.count, isDigit(bytes[position]) { position += 1 }
            }
            return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<position]), as: UTF8.self)
        }

        func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

        mutating func parseString() throws(DiffcastError) -> String {
            position += 1
            let start = position
            // Fast path: no escapes.
            while position < bytes.count {
                let byte = bytes[position]
                if byte == UInt8(ascii: "\"") {
                    let raw = UnsafeBufferPointer(rebasing: bytes[start..<position])
                    position += 1
                    // ASCII is valid UTF-8, and decoding it needs no generic validation (which
                    // costs a metadata lookup per string on the loop thread).
                    if raw.allSatisfy({ $0 < 0x80 }) { return String(decoding: raw, as: UTF8.self) }
                    guard let text = String(validating: raw, as: UTF8.self) else {
                        throw .parseError("invalid UTF-8 in a string ending at byte \(position)")
                    }
                    return text
                }
                if byte == UInt8(ascii: "\\") { break }
                if byte < 0x20 { throw error("control character in a string") }
                position += 1
            }
            var decoded = Array(UnsafeBufferPointer(rebasing: bytes[start..<position]))
            while position < bytes.count {
                let byte = bytes[position]
                switch byte {
                case UInt8(ascii: "\""):
                    position += 1
                    guard let text = String(validating: decoded, as: UTF8.self) else {
                        throw .parseError("invalid UTF-8 in a string ending at byte \(position)")
                    }
                    return text
                case UInt8(ascii: "\\"):
                    position += 1
                    try parseEscape(into: &decoded)
                case 0..<0x20:
                    throw error("control character in a string")
                default:
                    decoded.append(byte)
                    position += 1
                }
            }
            throw error("unterminated string")
        }

        mutating func parseEscape(into decoded: inout [UInt8]) throws(DiffcastError) {
            guard position < bytes.count else { throw error("unterminated escape") }
            let byte = bytes[position]
            position += 1
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): decoded.append(byte)
            case UInt8(ascii: "b"): decoded.append(0x08)
            case UInt8(ascii: "f"): decoded.append(0x0c)
            case UInt8(ascii: "n"): decoded.append(0x0a)
            case UInt8(ascii: "r"): decoded.append(0x0d)
            case UInt8(ascii: "t"): decoded.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try parseHex4()
                if (0xd800..<0xdc00).contains(scalar) {
                    guard position + 1 < bytes.count, bytes[position] == UInt8(ascii: "\\"),
                        bytes[position + 1] == UInt8(ascii: "u")
                    else { throw error("lone surrogate") }
                    position += 2
                    let low = try parseHex4()
                    guard (0xdc00..<0xe000).contains(low) else { throw error("bad surrogate pair") }
                    scalar = 0x10000 + ((scalar - 0xd800) << 10) + (low - 0xdc00)
                } else if (0xdc00..<0xe000).contains(scalar) {
                    throw error("lone surrogate")
                }
                guard let unicode = Unicode.Scalar(scalar) else { throw error("bad escape") }
                decoded.append(contentsOf: String(Character(unicode)).utf8)
            default:
                throw error("bad escape")
            }
        }

        mutating func parseHex4() throws(DiffcastError) -> UInt32 {
            guard position + 4 <= bytes.count else { throw error("short \\u escape") }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let byte = bytes[position]
                let digit: UInt8
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
                default: throw error("bad hex digit")
                }
                value = value << 4 | UInt32(digit)
                position += 1
            }
            return value
        }
    }
}

import DiffcastCore

/// A strict RFC 8259 parser over UTF-8 bytes with a nesting limit, so no input can exhaust the
/// stack. Errors are `parse_error`, or `limit_exceeded` for nesting past `maximumDepth`.
///
/// It reads a text into a flat list of tokens that point into the bytes (`JSONView`), with no
/// allocation per value: the request path decodes from that list and takes data that is already
/// canonical straight from the line. `parse` builds a `JSONValue` tree from the same tokens.
public struct JSONParser {
    public static let defaultMaximumDepth = 256

    /// Parses exactly one JSON value, surrounded by optional white space.
    public static func parse(
        _ bytes: some Collection<UInt8>, maximumDepth: Int = defaultMaximumDepth
    ) throws(DiffcastError) -> JSONValue {
        // Parsed in place when the bytes are contiguous (a request line is), copied otherwise.
        let parsed = bytes.withContiguousStorageIfAvailable { buffer in
            Result { () throws(DiffcastError) in try tree(of: buffer, maximumDepth: maximumDepth) }
        }
        if let parsed { return try parsed.get() }
        return try Array(bytes).withUnsafeBufferPointer { buffer throws(DiffcastError) in
            try tree(of: buffer, maximumDepth: maximumDepth)
        }
    }

    private static func tree(
        of buffer: UnsafeBufferPointer<UInt8>, maximumDepth: Int
    ) throws(DiffcastError) -> JSONValue {
        try withView(of: buffer, maximumDepth: maximumDepth) { $0.jsonValue }
    }

    /// `withView` for a `body` that cannot fail.
    static func withView<Result>(
        of buffer: UnsafeBufferPointer<UInt8>, maximumDepth: Int, _ body: (JSONView) -> Result
    ) throws(DiffcastError) -> Result {
        try withView(of: buffer, maximumDepth: maximumDepth, parseFailure: { (error: DiffcastError) in error }) {
            (view: JSONView) throws(DiffcastError) in body(view)
        }
    }

    /// Parses exactly one JSON value in `buffer` and passes `body` a view of it, valid only
    /// inside `body`. A parse error goes through `parseFailure`, so callers keep one error type.
    static func withView<Result, Failure: Error>(
        of buffer: UnsafeBufferPointer<UInt8>, maximumDepth: Int, parseFailure: (DiffcastError) -> Failure,
        _ body: (JSONView) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        var tokens: [JSONToken] = []
        return try withView(
            of: buffer, maximumDepth: maximumDepth, reusing: &tokens, parseFailure: parseFailure, body)
    }

    /// `withView` with an empty token list lent by the caller (`RequestParser.Workspace`), whose
    /// room it uses.
    static func withView<Result, Failure: Error>(
        of buffer: UnsafeBufferPointer<UInt8>, maximumDepth: Int, reusing tokens: inout [JSONToken],
        parseFailure: (DiffcastError) -> Failure, _ body: (JSONView) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        do {
            try tokenize(buffer, maximumDepth: maximumDepth, into: &tokens)
        } catch {
            throw parseFailure(error)
        }
        return try tokens.withUnsafeBufferPointer { tokens throws(Failure) in
            try body(JSONView(tokens: tokens, source: buffer, index: 0))
        }
    }

    private static func tokenize(
        _ buffer: UnsafeBufferPointer<UInt8>, maximumDepth: Int, into tokens: inout [JSONToken]
    ) throws(DiffcastError) {
        guard buffer.count < Int(UInt32.max) else { throw .limitExceeded("a JSON text of 4 GiB or more") }
        var parser = Cursor(bytes: buffer, maximumDepth: maximumDepth)
        swap(&parser.tokens, &tokens)
        defer { swap(&parser.tokens, &tokens) }
        // About one token per 8 bytes of a typical request, so one allocation usually suffices.
        parser.tokens.reserveCapacity(buffer.count / 8 + 4)
        parser.skipWhitespace()
        try parser.parseValue(depth: 0)
        parser.skipWhitespace()
        guard parser.position == buffer.count else {
            throw .parseError(
                "unexpected '\(parser.describeCurrent())' after the JSON value at byte \(parser.position)")
        }
    }

    /// Reads JSON text into tokens. It also decodes a string's escapes, for `JSONView`.
    struct Cursor {
        let bytes: UnsafeBufferPointer<UInt8>
        let maximumDepth: Int
        var position = 0
        var tokens: [JSONToken] = []
        /// The decoded bytes of the last string that had escapes.
        var decoded: [UInt8] = []

        init(bytes: UnsafeBufferPointer<UInt8>, maximumDepth: Int) {
            self.bytes = bytes
            self.maximumDepth = maximumDepth
        }

        func describeCurrent() -> String {
            guard position < bytes.count else { return "end of line" }
            let byte = bytes[position]
            return byte >= 0x20 && byte < 0x7f ? String(UnicodeScalar(byte)) : "\\x" + String(byte, radix: 16)
        }

        /// Skips white space; true when there was some.
        @discardableResult
        mutating func skipWhitespace() -> Bool {
            let start = position
            while position < bytes.count {
                switch bytes[position] {
                case 0x20, 0x09, 0x0a, 0x0d: position += 1
                default: return position > start
                }
            }
            return position > start
        }

        func error(_ what: String) -> DiffcastError {
            .parseError("\(what) at byte \(position) ('\(describeCurrent())')")
        }

        /// Appends the token of a value without inner tokens, which ends at `position`.
        private mutating func appendScalar(_ kind: JSONToken.Kind, from start: Int, canonical: Bool = true) {
            tokens.append(
                JSONToken(
                    kind: kind, isCanonical: canonical, start: UInt32(start), end: UInt32(position), count: 0,
                    next: UInt32(tokens.count + 1)))
        }

        mutating func parseValue(depth: Int) throws(DiffcastError) {
            guard position < bytes.count else { throw error("expected a value") }
            let start = position
            switch bytes[position] {
            case UInt8(ascii: "{"): try parseObject(depth: depth + 1)
            case UInt8(ascii: "["): try parseArray(depth: depth + 1)
            case UInt8(ascii: "\""): try parseString()
            case UInt8(ascii: "t"):
                try expectLiteral("true")
                appendScalar(.true, from: start)
            case UInt8(ascii: "f"):
                try expectLiteral("false")
                appendScalar(.false, from: start)
            case UInt8(ascii: "n"):
                try expectLiteral("null")
                appendScalar(.null, from: start)
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                try parseNumber()
                appendScalar(.number, from: start)
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

        /// Opens a container's token; `close` completes it.
        private mutating func open(_ kind: JSONToken.Kind) -> Int {
            tokens.append(
                JSONToken(kind: kind, isCanonical: true, start: UInt32(position), end: 0, count: 0, next: 0))
            position += 1
            return tokens.count - 1
        }

        private mutating func close(_ index: Int, count: Int, canonical: Bool) {
            tokens[index].end = UInt32(position)
            tokens[index].count = UInt32(count)
            tokens[index].next = UInt32(tokens.count)
            tokens[index].isCanonical = canonical
        }

        mutating func parseObject(depth: Int) throws(DiffcastError) {
            try checkDepth(depth)
            let index = open(.object)
            var count = 0
            var canonical = !skipWhitespace()
            var seenKeys = Set<Identifier>()
            if position < bytes.count, bytes[position] == UInt8(ascii: "}") {
                position += 1
                return close(index, count: 0, canonical: canonical)
            }
            while true {
                if skipWhitespace() { canonical = false }
                guard position < bytes.count, bytes[position] == UInt8(ascii: "\"") else {
                    throw error("expected a string key")
                }
                let keyPosition = position
                let keyIndex = tokens.count
                try parseString()
                if isDuplicateKey(keyIndex, of: index, count: count, seen: &seenKeys) {
                    let key = tokens[keyIndex].text(in: bytes)
                    throw .parseError("duplicate key '\(key)' in one object at byte \(keyPosition)")
                }
                if skipWhitespace() { canonical = false }
                guard position < bytes.count, bytes[position] == UInt8(ascii: ":") else { throw error("expected ':'") }
                position += 1
                if skipWhitespace() { canonical = false }
                let valueIndex = tokens.count
                try parseValue(depth: depth)
                count += 1
                canonical = canonical && tokens[keyIndex].isCanonical && tokens[valueIndex].isCanonical
                if skipWhitespace() { canonical = false }
                guard position < bytes.count else { throw error("unterminated object") }
                if bytes[position] == UInt8(ascii: ",") {
                    position += 1
                } else if bytes[position] == UInt8(ascii: "}") {
                    position += 1
                    return close(index, count: count, canonical: canonical)
                } else {
                    throw error("expected ',' or '}'")
                }
            }
        }

        /// Keys compared as decoded bytes; a scan for small objects, a set once they grow (no
        /// quadratic cost for an object with many keys).
        private func isDuplicateKey(
            _ keyIndex: Int, of object: Int, count: Int, seen: inout Set<Identifier>
        ) -> Bool {
            let key = tokens[keyIndex]
            if count < 16 {
                var index = object + 1
                for _ in 0..<count {
                    if tokens[index].hasSameText(as: key, in: bytes) { return true }
                    index = Int(tokens[index + 1].next)
                }
                return false
            }
            if seen.isEmpty {
                var index = object + 1
                for _ in 0..<count {
                    seen.insert(Identifier(tokens[index].text(in: bytes)))
                    index = Int(tokens[index + 1].next)
                }
            }
            return !seen.insert(Identifier(key.text(in: bytes))).inserted
        }

        mutating func parseArray(depth: Int) throws(DiffcastError) {
            try checkDepth(depth)
            let index = open(.array)
            var count = 0
            var canonical = !skipWhitespace()
            if position < bytes.count, bytes[position] == UInt8(ascii: "]") {
                position += 1
                return close(index, count: 0, canonical: canonical)
            }
            while true {
                if skipWhitespace() { canonical = false }
                let elementIndex = tokens.count
                try parseValue(depth: depth)
                count += 1
                canonical = canonical && tokens[elementIndex].isCanonical
                if skipWhitespace() { canonical = false }
                guard position < bytes.count else { throw error("unterminated array") }
                if bytes[position] == UInt8(ascii: ",") {
                    position += 1
                } else if bytes[position] == UInt8(ascii: "]") {
                    position += 1
                    return close(index, count: count, canonical: canonical)
                } else {
                    throw error("expected ',' or ']'")
                }
            }
        }

        mutating func parseNumber() throws(DiffcastError) {
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
        }

        func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

        /// Reads a string and appends its token. A string with escapes is decoded into
        /// `decoded`, to check that it is UTF-8.
        mutating func parseString() throws(DiffcastError) {
            let start = position
            position += 1
            skipPlainASCII()
            // Fast path: no escapes.
            var seenNonASCII = false
            while position < bytes.count {
                let byte = bytes[position]
                if byte == UInt8(ascii: "\"") {
                    let raw = UnsafeBufferPointer(rebasing: bytes[(start + 1)..<position])
                    position += 1
                    // ASCII is valid UTF-8 and needs no generic validation (which costs a
                    // metadata lookup per string on the loop thread).
                    if seenNonASCII, String(validating: raw, as: UTF8.self) == nil {
                        throw .parseError("invalid UTF-8 in a string ending at byte \(position)")
                    }
                    return appendScalar(.string, from: start)
                }
                if byte == UInt8(ascii: "\\") { break }
                if byte < 0x20 { throw error("control character in a string") }
                if byte >= 0x80 { seenNonASCII = true }
                position += 1
            }
            decoded.removeAll(keepingCapacity: true)
            decoded.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[(start + 1)..<position]))
            var canonical = true
            while position < bytes.count {
                let byte = bytes[position]
                switch byte {
                case UInt8(ascii: "\""):
                    position += 1
                    guard String(validating: decoded, as: UTF8.self) != nil else {
                        throw .parseError("invalid UTF-8 in a string ending at byte \(position)")
                    }
                    return appendScalar(.escapedString, from: start, canonical: canonical)
                case UInt8(ascii: "\\"):
                    position += 1
                    if !(try parseEscape()) { canonical = false }
                case 0..<0x20:
                    throw error("control character in a string")
                default:
                    decoded.append(byte)
                    position += 1
                }
            }
            throw error("unterminated string")
        }

        /// Moves over string bytes eight at a time while none is a quote, a backslash, a control
        /// character or outside ASCII: most of a string's bytes, read word by word.
        private mutating func skipPlainASCII() {
            guard let base = bytes.baseAddress else { return }
            let ones: UInt64 = 0x0101_0101_0101_0101
            let highBits: UInt64 = 0x8080_8080_8080_8080
            /// The high bit set in some byte when a byte of `word` is zero (exact as a whole).
            func hasZeroByte(_ word: UInt64) -> UInt64 { (word &- ones) & ~word & highBits }
            while position + 8 <= bytes.count {
                let word = UnsafeRawPointer(base + position).loadUnaligned(as: UInt64.self)
                let nonASCII = word & highBits
                let control = (word &- ones &* 0x20) & ~word & highBits
                let quote = hasZeroByte(word ^ (ones &* UInt64(UInt8(ascii: "\""))))
                let backslash = hasZeroByte(word ^ (ones &* UInt64(UInt8(ascii: "\\"))))
                guard nonASCII | control | quote | backslash == 0 else { return }
                position += 8
            }
        }

        /// Decodes one escape into `decoded`; true when it is written as `JSONOutput` writes it.
        mutating func parseEscape() throws(DiffcastError) -> Bool {
            guard position < bytes.count else { throw error("unterminated escape") }
            let byte = bytes[position]
            position += 1
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"): decoded.append(byte)
            case UInt8(ascii: "/"):
                decoded.append(byte)
                return false
            case UInt8(ascii: "b"): decoded.append(0x08)
            case UInt8(ascii: "f"): decoded.append(0x0c)
            case UInt8(ascii: "n"): decoded.append(0x0a)
            case UInt8(ascii: "r"): decoded.append(0x0d)
            case UInt8(ascii: "t"): decoded.append(0x09)
            case UInt8(ascii: "u"):
                let digits = UnsafeBufferPointer(rebasing: bytes[position..<min(position + 4, bytes.count)])
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
                // `JSONOutput` writes `\u00xx` (lower case) only for control characters that
                // have no short escape.
                let hasShortEscape = [0x08, 0x09, 0x0a, 0x0c, 0x0d].contains(scalar)
                return scalar < 0x20 && !hasShortEscape && !digits.contains { (0x41...0x46).contains($0) }
            default:
                throw error("bad escape")
            }
            return true
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

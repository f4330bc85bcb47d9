import DiffcastCore

#if canImport(Glibc)
    import Glibc
#endif

/// Reads, in one pass and without the token list, the request a feed sends over and over:
/// `{"op":"append_items","collection":NAME,"items":[…]}` written compactly in that order,
/// optionally with `"section":ID` last (as the Python client writes it), each item a plain
/// string identifier or `{"id":…}` / `{"id":…,"data":…}` with canonical data.
///
/// It is a shortcut, not a second parser: anything else, and anything the general path would
/// refuse, makes it return nil, and the general path (`RequestParser`) then reads the line and
/// names the culprit. So whatever it returns is the request the general path makes of the same
/// line (a law `CompactAppendReaderTests` and the `request_line` fuzz target check). The data
/// values are read by the general tokenizer, so they are checked exactly as everywhere else.
///
/// `make bench BENCH=instructions` counts what it saves: compact lines against the same lines
/// with one space, which the general parser reads (docs/performance.md).
enum CompactAppendReader {
    /// Whether a byte may stand in a plain string: printable ASCII other than a quote or a
    /// backslash. What a JSON string must escape, and anything outside ASCII (whose UTF-8 needs
    /// checking), is left to the general path.
    private static func isPlain(_ byte: UInt8) -> Bool {
        byte >= 0x20 && byte < 0x7f && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: "\\")
    }

    /// The request `line` holds, or nil when the line is not of this shape or is refused.
    /// `tokens`, empty, lends its room to the data values' tokens (`RequestParser.Workspace`).
    static func request(
        from line: UnsafeBufferPointer<UInt8>, limits: RequestLimits, tokens: inout [JSONToken]
    ) -> Request? {
        // The general path refuses lines of 4 GiB, and JSON deeper than the limit: an item's
        // object is the third level.
        guard line.count < Int(UInt32.max), limits.maximumDepth >= 3 else { return nil }
        var reader = Reader(line: line, limits: limits)
        swap(&reader.cursor.tokens, &tokens)
        defer { swap(&reader.cursor.tokens, &tokens) }
        guard reader.skip(#"{"op":"append_items","collection":""#),
            let name = reader.collectionName(),
            reader.skip(#","items":["#), let items = reader.items()
        else { return nil }
        var section: Identifier?
        if reader.skip(#","section":""#) {
            guard let id = reader.plainString(maximumLength: limits.maximumIdentifierBytes) else { return nil }
            section = Identifier(id)
        }
        guard reader.skip("}"), reader.isAtEnd else { return nil }
        return Request(
            id: nil, op: "append_items", command: .write(collection: name, .appendItems(items, section: section)))
    }

    private struct Reader {
        let line: UnsafeBufferPointer<UInt8>
        let limits: RequestLimits
        var position = 0
        /// Reads data values; its tokens are kept for the whole line, in the room lent.
        var cursor: JSONParser.Cursor

        init(line: UnsafeBufferPointer<UInt8>, limits: RequestLimits) {
            self.line = line
            self.limits = limits
            cursor = JSONParser.Cursor(bytes: line, maximumDepth: limits.maximumDepth)
        }

        var isAtEnd: Bool { position == line.count }

        /// Moves past `text` when the line goes on with it.
        mutating func skip(_ text: StaticString) -> Bool {
            let count = text.utf8CodeUnitCount
            guard position + count <= line.count, let base = line.baseAddress,
                memcmp(base + position, text.utf8Start, count) == 0
            else { return false }
            position += count
            return true
        }

        /// The plain bytes up to the next quote, which it moves past: a string of 1 to
        /// `maximumLength` bytes with no escape and nothing outside ASCII, whose opening quote
        /// has been read. (A comparison, not a range: a limit below 1 refuses, never traps.)
        mutating func plainString(maximumLength: Int) -> String? {
            let start = position
            while position < line.count, CompactAppendReader.isPlain(line[position]) { position += 1 }
            let length = position - start
            guard position < line.count, line[position] == UInt8(ascii: "\""), length >= 1, length <= maximumLength
            else { return nil }
            position += 1
            return String(decoding: UnsafeBufferPointer(rebasing: line[start..<(position - 1)]), as: UTF8.self)
        }

        /// A valid collection name up to the next quote, which it moves past; its opening quote
        /// has been read. Checked on the bytes, before a `String` is made of them.
        mutating func collectionName() -> String? {
            let start = position
            guard let end = line[start...].firstIndex(of: UInt8(ascii: "\"")),
                CollectionName.isValid(utf8: UnsafeBufferPointer(rebasing: line[start..<end]))
            else { return nil }
            position = end + 1
            return String(decoding: UnsafeBufferPointer(rebasing: line[start..<end]), as: UTF8.self)
        }

        /// The items of a list whose `[` has been read, through its `]`; at least one. Room for
        /// one is made first: a feed's one item then takes no growth of the list.
        mutating func items() -> [Item]? {
            var items: [Item] = []
            items.reserveCapacity(1)
            while true {
                guard let item = item() else { return nil }
                items.append(item)
                if skip(",") { continue }
                return skip("]") ? items : nil
            }
        }

        /// `"ID"`, `{"id":"ID"}` or `{"id":"ID","data":VALUE}` with VALUE canonical.
        private mutating func item() -> Item? {
            let maximumLength = limits.maximumIdentifierBytes
            if skip("\"") {
                return plainString(maximumLength: maximumLength).map { Item(id: Identifier($0)) }
            }
            guard skip(#"{"id":""#), let id = plainString(maximumLength: maximumLength) else { return nil }
            if skip("}") { return Item(id: Identifier(id)) }
            guard skip(#","data":"#), let data = value(), skip("}") else { return nil }
            return Item(id: Identifier(id), data: data)
        }

        /// A data value read by the general tokenizer at an item's depth: nil when it is not
        /// JSON or not canonical; `.some(nil)` for `null`, which is no data.
        private mutating func value() -> JSONText?? {
            // Reserved as the general tokenizer reserves (grown one token at a time, the list would
            // be reallocated for every value), when the room lent is less.
            let room = line.count / 8 + 4
            if cursor.tokens.capacity < room { cursor.tokens.reserveCapacity(room) }
            let first = cursor.tokens.count
            cursor.position = position
            do {
                try cursor.parseValue(depth: 3)
            } catch {
                return nil
            }
            let token = cursor.tokens[first]
            guard token.isCanonical else { return nil }
            position = cursor.position
            if token.kind == .null { return .some(nil) }
            return .some(
                JSONText(
                    canonical: String(
                        decoding: UnsafeBufferPointer(rebasing: line[Int(token.start)..<Int(token.end)]), as: UTF8.self)
                ))
        }
    }
}

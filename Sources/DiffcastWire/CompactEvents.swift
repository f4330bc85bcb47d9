/// The compact form of changeset events, which a page asks for (`?compact=1` on an event stream or
/// on the WebSocket endpoint): the same changeset without the members its subscription already
/// established, so that a single append to a thousand pages does not carry the same envelope a
/// thousand times.
///
/// - `epoch` is left out: a subscription's epoch changes only with a snapshot (or a `dropped`),
///   which keep it; a changeset continues the epoch of the event before it.
/// - `from` is left out: in a subscription's chain every changeset's `from` is the version of
///   the event before it (SPEC, Events), which the subscriber holds.
/// - `collection` is left out of a Server-Sent Events stream, which follows one collection (its
///   URL names it); a WebSocket carries several subscriptions and keeps it.
///
/// The version, the changes and the digest stay: a compact changeset is applied exactly as a
/// full one, and the subscriber still verifies every version by its digest. Snapshots and the
/// other events are never compacted.
public enum CompactEvents {
    /// The compact form of a changeset event line as `WireEncoder` writes it
    /// (`{"event":"changeset","collection":…,"epoch":…,"from":…,"version":…`), keeping the
    /// collection or not; nil for any other line, which goes out as it is.
    public static func changeset(_ line: UnsafeRawBufferPointer, keepingCollection: Bool) -> [UInt8]? {
        var cursor = Cursor(bytes: line)
        guard cursor.skip(Self.kind) else { return nil }
        // `"collection":NAME,`, kept or not.
        let collectionStart = cursor.offset
        guard cursor.skip(#""collection":"#), cursor.skipString(), cursor.skip(",") else { return nil }
        let collectionEnd = cursor.offset
        guard cursor.skip(#""epoch":"#), cursor.skipString(), cursor.skip(#","from":"#), cursor.skipDigits(),
            cursor.skip(",")
        else { return nil }
        let rest = cursor.offset
        guard cursor.skip(#""version":"#) else { return nil }
        var compact = Array(UnsafeBufferPointer(start: Self.kind.utf8Start, count: Self.kind.utf8CodeUnitCount))
        compact.reserveCapacity(line.count - (rest - collectionStart))
        if keepingCollection { compact += line[collectionStart..<collectionEnd] }
        compact += line[rest...]
        return compact
    }

    /// How every changeset line starts.
    private static let kind: StaticString = #"{"event":"changeset","#

    /// A reading position in a line that checks the encoder's layout as it goes.
    private struct Cursor {
        let bytes: UnsafeRawBufferPointer
        var offset = 0

        /// Steps over `text` when the line continues with it.
        mutating func skip(_ text: StaticString) -> Bool {
            let count = text.utf8CodeUnitCount
            guard bytes.count - offset >= count else { return false }
            let matches = UnsafeRawBufferPointer(start: text.utf8Start, count: count).elementsEqual(
                bytes[offset..<(offset + count)])
            if matches { offset += count }
            return matches
        }

        /// Steps over a JSON string, its quotes and escapes included.
        mutating func skipString() -> Bool {
            guard offset < bytes.count, bytes[offset] == UInt8(ascii: "\"") else { return false }
            var index = offset + 1
            while index < bytes.count {
                switch bytes[index] {
                case UInt8(ascii: "\\"): index += 2
                case UInt8(ascii: "\""):
                    offset = index + 1
                    return true
                default: index += 1
                }
            }
            return false
        }

        /// Steps over one or more decimal digits.
        mutating func skipDigits() -> Bool {
            let start = offset
            while offset < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[offset]) {
                offset += 1
            }
            return offset > start
        }
    }
}

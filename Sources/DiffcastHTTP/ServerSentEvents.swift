/// Server-Sent Events framing of the daemon's event lines (the same JSON the socket sends):
/// `id:` is `EPOCH:VERSION`, so that a browser's EventSource resumes by itself with
/// `Last-Event-ID`, and `event:` is the event's kind.
public enum ServerSentEvents {
    /// The `id:`, `event:` and `data: ` that go before an event line; the line itself (with its
    /// newline) and one more newline follow it. Read from the line's first members, which the
    /// daemon writes in a fixed order. Without `namingKind`, the `event:` line is left out: the
    /// event comes as EventSource's default `message`, and its data says what it is (a compact
    /// stream's changesets, `CompactEvents`).
    public static func prefix(of line: UnsafeRawBufferPointer) -> [UInt8] {
        prefix(of: line, namingKind: true)
    }

    public static func prefix(of line: UnsafeRawBufferPointer, namingKind: Bool) -> [UInt8] {
        let head = UnsafeRawBufferPointer(rebasing: line.prefix(512))
        var prefix: [UInt8] = []
        if let epoch = stringMember("epoch", in: head), let version = numberMember("version", in: head) {
            prefix += Array("id: ".utf8) + epoch + [UInt8(ascii: ":")] + version + [UInt8(ascii: "\n")]
        }
        if namingKind, let kind = stringMember("event", in: head) {
            prefix += Array("event: ".utf8) + kind + [UInt8(ascii: "\n")]
        }
        return prefix + Array("data: ".utf8)
    }

    /// What `Last-Event-ID` (or a `last_event_id` query) names: the epoch and version to
    /// resume from; nil when it is not `EPOCH:VERSION`.
    public static func resumePoint(_ id: String) -> (epoch: String, version: UInt64)? {
        let parts = id.split(separator: ":")
        guard parts.count == 2, let version = UInt64(parts[1]), !parts[0].isEmpty,
            parts[0].utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
        else { return nil }
        return (String(parts[0]), version)
    }

    /// A comment line that keeps proxies from closing an idle stream.
    public static let heartbeat = Array(": heartbeat\n\n".utf8)

    /// The bytes of `"key":"VALUE"`'s value (an epoch or a kind: no escapes).
    private static func stringMember(_ key: String, in bytes: UnsafeRawBufferPointer) -> [UInt8]? {
        guard let start = find(Array("\"\(key)\":\"".utf8), in: bytes) else { return nil }
        let value = bytes[start...].prefix { $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }
        guard value.endIndex < bytes.endIndex, bytes[value.endIndex] == UInt8(ascii: "\"") else { return nil }
        return Array(value)
    }

    private static func numberMember(_ key: String, in bytes: UnsafeRawBufferPointer) -> [UInt8]? {
        guard let start = find(Array("\"\(key)\":".utf8), in: bytes) else { return nil }
        let digits = bytes[start...].prefix { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
        return digits.isEmpty ? nil : Array(digits)
    }

    /// Where the bytes after the first occurrence of `needle` start.
    private static func find(_ needle: [UInt8], in bytes: UnsafeRawBufferPointer) -> Int? {
        guard bytes.count >= needle.count else { return nil }
        for start in 0...(bytes.count - needle.count)
        where bytes[start] == needle[0] && bytes[start..<(start + needle.count)].elementsEqual(needle) {
            return start + needle.count
        }
        return nil
    }
}

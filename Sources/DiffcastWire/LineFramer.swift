#if canImport(Glibc)
    import Glibc
#endif

/// Splits a byte stream into `\n`-terminated lines, with a bound on line length: a line past
/// the bound is reported once and its remaining bytes skipped, so no client can make the
/// daemon buffer without limit. The daemon frames requests with it, clients frame events.
public struct LineFramer: Sendable {
    /// What the framer found in the bytes it was given.
    public enum Piece {
        /// A line without its `\n`, valid only during the call it is passed to: bytes of the
        /// chunk itself when the line lies within it (no copy), else of the framer's buffer.
        case line(UnsafeBufferPointer<UInt8>)
        case lineTooLong
    }

    public let maximumLineBytes: Int
    private var partial: [UInt8] = []
    private var skipping = false

    public init(maximumLineBytes: Int) {
        self.maximumLineBytes = maximumLineBytes
    }

    public mutating func feed(_ chunk: UnsafeRawBufferPointer, _ emit: (Piece) -> Void) {
        var start = 0
        while start < chunk.count {
            let newline = Self.firstNewline(in: chunk, from: start)
            let end = newline ?? chunk.count
            if skipping {
                if newline != nil { skipping = false }
            } else if partial.count + (end - start) > maximumLineBytes {
                partial = []
                emit(.lineTooLong)
                skipping = newline == nil
            } else if let newline {
                if partial.isEmpty {
                    let line = UnsafeRawBufferPointer(rebasing: chunk[start..<newline])
                    emit(.line(line.assumingMemoryBound(to: UInt8.self)))
                } else {
                    partial.append(contentsOf: chunk[start..<newline])
                    partial.withUnsafeBufferPointer { emit(.line($0)) }
                    partial = []
                }
            } else {
                partial.append(contentsOf: chunk[start..<end])
            }
            start = end + 1
        }
    }

    /// The index of the first `\n` at or after `start` (memchr: many bytes per step).
    private static func firstNewline(in chunk: UnsafeRawBufferPointer, from start: Int) -> Int? {
        guard let base = chunk.baseAddress, start < chunk.count,
            let found = memchr(base + start, Int32(UInt8(ascii: "\n")), chunk.count - start)
        else { return nil }
        return base.distance(to: UnsafeRawPointer(found))
    }
}

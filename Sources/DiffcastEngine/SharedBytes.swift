/// Immutable bytes on the heap with a stable address, shared by every connection that sends
/// them: an event is encoded once and the same buffer is handed to each subscriber's writes.
public final class SharedBytes: @unchecked Sendable {
    public let pointer: UnsafeMutableRawPointer
    public let count: Int

    public init(_ bytes: [UInt8]) {
        count = bytes.count
        pointer = UnsafeMutableRawPointer.allocate(byteCount: max(bytes.count, 1), alignment: 1)
        bytes.withUnsafeBytes { source in
            if let base = source.baseAddress {
                pointer.copyMemory(from: base, byteCount: bytes.count)
            }
        }
    }

    /// `bytes` written `times` times over, one after the other.
    public init(_ bytes: SharedBytes, times: Int) {
        count = bytes.count * times
        pointer = UnsafeMutableRawPointer.allocate(byteCount: max(count, 1), alignment: 1)
        for time in 0..<times {
            (pointer + time * bytes.count).copyMemory(from: bytes.pointer, byteCount: bytes.count)
        }
    }

    /// A copy of the bytes.
    public var bytes: [UInt8] { [UInt8](UnsafeRawBufferPointer(start: pointer, count: count)) }

    /// Reads the bytes in place.
    public func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        try body(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    deinit {
        pointer.deallocate()
    }
}

import CLibUV
import Dispatch
import Glibc
import Synchronization

/// Threads that help the loop write a slice of subscribers (`io_threads` above 1), the way
/// Redis 6's I/O threads write replies: the loop takes each connection's queued bytes and
/// describes them as one vectored write; the writes are shared out between the loop and the
/// helpers, each `writev` made by whichever thread takes it next; the loop waits for all of them
/// and then settles every result itself (written, partly written, failed).
///
/// Nothing but `writev` runs off the loop: no connection, no Swift object, no libuv call. The
/// bytes stay alive in the loop's hands while the helpers write them, because the loop waits.
/// So every ordering promise holds as with one thread: a connection is written by one thread
/// in one slice, its bytes in their order.
final class WriterThreads: @unchecked Sendable {
    /// One connection's vectored write: its socket, its buffers in the shared list, and, once
    /// made, what `writev` returned (bytes written, or `-errno`).
    struct Write {
        var descriptor: Int32
        var firstBuffer: Int
        var bufferCount: Int
        var result = 0
    }

    /// Helpers running: `stop` makes it 0.
    private var helperCount = 0
    private let start = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    private let nextWrite = Atomic<Int>(0)
    /// Set by the loop before it wakes the helpers, read by them until they signal `finished`.
    private var writes = UnsafeMutableBufferPointer<Write>(start: nil, count: 0)
    private var buffers: UnsafePointer<uv_buf_t>?
    private var isStopping = false

    /// Starts `helperCount` threads; fewer if the system refuses one.
    init(helperCount: Int) {
        var started = 0
        for _ in 0..<helperCount {
            var thread = pthread_t()
            let context = Unmanaged.passRetained(self).toOpaque()
            let result = pthread_create(
                &thread, nil,
                { context in
                    guard let context else { return nil }
                    Unmanaged<WriterThreads>.fromOpaque(context).takeRetainedValue().serve()
                    return nil
                }, context)
            guard result == 0 else {
                Unmanaged<WriterThreads>.fromOpaque(context).release()
                break
            }
            pthread_detach(thread)
            started += 1
        }
        self.helperCount = started
    }

    /// Whether any helper runs: without one the loop writes alone.
    var hasHelpers: Bool { helperCount > 0 }

    /// On the loop thread: makes every write, on this thread and the helpers, and returns once
    /// all are made, with their results in `writes`.
    func perform(_ writes: inout [Write], buffers: [uv_buf_t]) {
        guard !writes.isEmpty else { return }
        writes.withUnsafeMutableBufferPointer { writes in
            buffers.withUnsafeBufferPointer { buffers in
                self.writes = writes
                self.buffers = buffers.baseAddress
                nextWrite.store(0, ordering: .relaxed)
                for _ in 0..<helperCount { start.signal() }
                writeUntilNoneIsLeft()
                for _ in 0..<helperCount { finished.wait() }
                self.writes = UnsafeMutableBufferPointer(start: nil, count: 0)
                self.buffers = nil
            }
        }
    }

    /// On the loop thread, once: the helpers return. Later calls to `perform` write on the loop
    /// alone.
    func stop() {
        isStopping = true
        for _ in 0..<helperCount { start.signal() }
        for _ in 0..<helperCount { finished.wait() }
        helperCount = 0
    }

    private func serve() {
        while true {
            start.wait()
            if isStopping {
                finished.signal()
                return
            }
            writeUntilNoneIsLeft()
            finished.signal()
        }
    }

    private func writeUntilNoneIsLeft() {
        while true {
            let index = nextWrite.wrappingAdd(1, ordering: .relaxed).oldValue
            guard index < writes.count, let buffers else { return }
            let write = writes[index]
            var result: Int
            repeat {
                result = (buffers + write.firstBuffer).withMemoryRebound(to: iovec.self, capacity: write.bufferCount) {
                    writev(write.descriptor, $0, Int32(write.bufferCount))
                }
            } while result < 0 && errno == EINTR
            writes[index].result = result < 0 ? -Int(errno) : result
        }
    }
}

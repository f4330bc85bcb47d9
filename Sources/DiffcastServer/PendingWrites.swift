import DiffcastEngine

/// A connection's bytes on their way out: the buffers queued and not yet handed to a write, the
/// one write in progress (the loop's `send` or `uv_write`, or a writer thread's `writev`), and
/// what the two add up to, which the connection's water marks measure. One value, so that every
/// route out of `Server.flushMarked` changes the same state the same way, and so that it is tested
/// without a socket (`PendingWritesTests`). Changed on the loop thread only: a writer thread is
/// handed buffers already taken (`take`), and the loop is told what the kernel took.
struct PendingWrites {
    /// The queued buffer when exactly one is queued, a fan-out's usual write: kept apart from
    /// `several`, queueing it and dropping it once written touch no array storage (a thousand
    /// subscribers' arrays are a thousand heap objects, each a cache miss per version). Never
    /// set while `several` holds any.
    private var lone: SharedBytes?
    /// The queued buffers when more than one has been queued since the queue was last empty, in
    /// the order they go out; none of them is part of a write yet.
    private var several: [SharedBytes] = []
    /// Bytes queued.
    private(set) var queuedBytes = 0
    /// Bytes of the write in progress that the kernel has not taken yet.
    private(set) var bytesInFlight = 0
    /// A write is in progress: no other starts until it has finished.
    private(set) var isWriting = false
    /// What is queued holds an answer: a client waits for it, so it never lingers.
    private(set) var holdsAnswer = false

    /// Room for a few dozen events is kept after a flush; more goes (a burst would hold it for
    /// good).
    private static let keptCapacity = 64

    var isEmpty: Bool { lone == nil && several.isEmpty }

    /// The queued buffers, in the order they go out.
    var queued: [SharedBytes] { lone.map { [$0] } ?? several }

    /// Bytes queued or being written and not yet taken by the kernel.
    var unsentBytes: Int { queuedBytes + bytesInFlight }

    /// Queues `bytes` behind what is queued; `isAnswer` when a client waits for them.
    mutating func append(_ bytes: SharedBytes, isAnswer: Bool = false) {
        defer { checkInvariants() }
        if lone == nil && several.isEmpty {
            lone = bytes
        } else {
            if let first = lone.take() { several.append(first) }
            several.append(bytes)
        }
        queuedBytes += bytes.count
        if isAnswer { holdsAnswer = true }
    }

    /// The bytes of the queued buffer when exactly one is queued (a fan-out's usual write, which
    /// needs no vector of buffers); nil when none or several are. They stay where they are while
    /// the buffer is queued (`SharedBytes` never moves its bytes).
    var onlyQueued: UnsafeRawBufferPointer? {
        if let lone { return UnsafeRawBufferPointer(start: lone.pointer, count: lone.count) }
        guard several.count == 1 else { return nil }
        return UnsafeRawBufferPointer(start: several[0].pointer, count: several[0].count)
    }

    /// Shows `body` up to `limit` queued buffers, in place, for one vectored write: the queue keeps
    /// its storage, where handing it to each write would make the next event allocate another.
    func withQueued<Result>(limit: Int, _ body: (UnsafeBufferPointer<SharedBytes>) -> Result) -> Result {
        if let lone { return withUnsafePointer(to: lone) { body(UnsafeBufferPointer(start: $0, count: 1)) } }
        return several.withUnsafeBufferPointer { body(UnsafeBufferPointer(rebasing: $0.prefix(limit))) }
    }

    /// Forgets the first `count` queued buffers, `bytes` in all, which the kernel took whole
    /// (a write that finished at once, without becoming the write in progress).
    mutating func dropWritten(_ count: Int, bytes: Int) {
        defer { checkInvariants() }
        if lone != nil {
            lone = nil
            holdsAnswer = false
        } else if count == several.count {
            if several.capacity > Self.keptCapacity {
                several = []
            } else {
                several.removeAll(keepingCapacity: true)
            }
            holdsAnswer = false
        } else {
            several.removeFirst(count)
        }
        queuedBytes -= bytes
    }

    /// Takes up to `limit` queued buffers as the write in progress.
    mutating func take(limit: Int) -> [SharedBytes] {
        defer { checkInvariants() }
        let taken: [SharedBytes]
        if let first = lone.take() {
            taken = [first]
            holdsAnswer = false
        } else if several.count <= limit {
            taken = several
            several = []
            holdsAnswer = false
        } else {
            taken = Array(several.prefix(limit))
            several.removeFirst(taken.count)
        }
        let bytes = taken.reduce(0) { $0 + $1.count }
        queuedBytes -= bytes
        bytesInFlight += bytes
        isWriting = true
        return taken
    }

    /// The kernel took `bytes` of the write in progress; the rest is still being written.
    mutating func sent(bytes: Int) {
        defer { checkInvariants() }
        bytesInFlight -= bytes
    }

    /// The write in progress is over, its last `bytes` taken by the kernel (or given up when the
    /// connection failed).
    mutating func writeFinished(bytes: Int) {
        defer { checkInvariants() }
        bytesInFlight -= bytes
        isWriting = false
    }

    /// What the counts promise between calls, checked after every change in debug builds
    /// (`DIFFCAST_INTERNAL_CHECKS`): no count below zero, nothing queued when no buffer is,
    /// nothing in flight when no write is, and an answer only among queued buffers.
    private func checkInvariants() {
        #if DIFFCAST_INTERNAL_CHECKS
            precondition(queuedBytes >= 0 && bytesInFlight >= 0, "pending writes counted below zero")
            precondition(lone == nil || several.isEmpty, "a lone buffer queued beside several")
            precondition(!isEmpty || queuedBytes == 0, "pending bytes counted with no buffer queued")
            precondition(isWriting || bytesInFlight == 0, "bytes in flight with no write in progress")
            precondition(!holdsAnswer || !isEmpty, "an answer held with no buffer queued")
        #endif
    }

    /// Forgets what is queued and not yet part of a write (a slow subscriber's events, when a
    /// catch-up replaces them; everything, when the connection closes).
    mutating func discardQueued() {
        defer { checkInvariants() }
        lone = nil
        several = []
        queuedBytes = 0
        holdsAnswer = false
    }
}

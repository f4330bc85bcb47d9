import CLibUV
import CSystem
import DiffcastCore
import DiffcastEngine
import DiffcastHTTP
import DiffcastWire
import Glibc
import Logging

/// Writing what connections queued: straight to the socket when the kernel takes it, else a
/// `uv_write` whose completion starts the next.
extension Server {
    // MARK: - Writing

    /// Writes what the marked connections queued: answers at once; a stream's events after the
    /// linger; a subscriber's events in its turn (`writeTurns`).
    func flushMarked() {
        repeat {
            schedule.takeMarked(into: &flushing)
            for connection in flushing {
                if connection.isClosing {
                    schedule.skip(connection)
                } else if mayLinger(connection) {
                    schedule.linger(connection)
                } else if mayWaitItsTurn(connection) {
                    schedule.waitTurn(connection)
                } else {
                    schedule.writeNow(connection)
                    write(connection)
                }
            }
            flushing.removeAll(keepingCapacity: true)
            // Connections that drained may have asked for catch-ups.
            submitPendingJobs()
        } while schedule.hasMarked
        if schedule.lingeringCount > 0 { armLingerTimer() }
        if schedule.turnsWaiting > 0 { startTurns() }
    }

    /// Writes what a connection queued, then lets it read again or finish.
    private func write(_ connection: Connection) {
        startWrite(connection)
        resumeReadingIfDrained(connection)
        finishIfDone(connection)
    }

    // MARK: - Turns

    /// Whether a connection's new bytes may wait for its turn: events alone (a client waiting
    /// for an answer is written at once), on a connection that is not finishing. One with
    /// nothing queued (marked by a read that queued no answer yet) has nothing to wait for: the
    /// flush lets it read again or finish, and it takes no place in the line.
    func mayWaitItsTurn(_ connection: Connection) -> Bool {
        turnHandle != nil && connection.hasOutbound && connection.queuesOnlyEvents && !connection.isFinishing
    }

    /// Loop iterations over which the subscribers waiting are written: between two, the loop
    /// reads and applies what arrived meanwhile, and the subscribers still waiting get it in the
    /// same write. More iterations coalesce more versions per write (fewer writes for the daemon
    /// and fewer reads for the subscribers, per delivery), and each subscriber waits a little
    /// longer. 5 keeps the p50 of 1,000 subscribers at Redis's in the `pipeline` fan-out; more
    /// deliver more but later (docs/performance.md has the figures for each value measured).
    static let iterationsPerPass = 5

    /// The fewest connections written per loop iteration while turns wait: a few dozen
    /// subscribers are written in one iteration.
    static let leastWritesPerIteration = 64

    /// The fewest connections of a slice worth waking the writer threads for.
    static let leastParallelWrites = 32

    // MARK: - Sending at once

    /// Delivers the outcomes of a batch applied on the loop (from clients that wait for their
    /// answers). When the batch published one version to no more subscribers than one turn
    /// writes (`leastWritesPerIteration`), no turns wait and the loop writes alone, the
    /// version's event is sent to each idle line subscriber as the fan-out reaches it
    /// (`sendAtOnce`): one `send` from the shared bytes, with nothing queued, nothing put in the
    /// line of turns, and nothing taken out of either. The one turn would have written them all
    /// before the loop reads again, so they get what they would have got, at less cost. A larger
    /// fan-out waits its turns, between which the loop reads, so that a version published
    /// meanwhile reaches its later subscribers in the same write: sent whole at once, each
    /// version to a thousand subscribers would be a thousand sends, which a publisher that waits
    /// only for its answer outpaces. A batch that published several versions, or a version
    /// published while turns wait (the loop is behind), goes through the queues and the turns.
    func deliverAppliedHere(_ outcomes: [Outcome]) {
        var published: String?
        var versions = 0
        for case .published(let name, _, _, _, _) in outcomes {
            published = name
            versions += 1
        }
        let sendsAtOnce =
            versions == 1 && schedule.turnsWaiting == 0 && writerThreads?.hasHelpers != true
            && published.map { fanOut.subscriberCount(of: $0) <= Self.leastWritesPerIteration } == true
        for outcome in outcomes {
            if case .published = outcome { self.sendsAtOnce = sendsAtOnce }
            deliver(outcome)
            self.sendsAtOnce = false
        }
    }

    /// Sends `bytes` to an idle line subscriber now, while `sendsAtOnce`: one with nothing
    /// queued, no write in flight, not marked, waiting for nothing and not finishing, so that
    /// nothing of its own can be due before them. What the kernel did not take of them goes to
    /// a `uv_write`, as `startWrite` leaves the rest of any write; when it took none (a full
    /// socket, or an error its turn's write will meet), the caller queues them all. Whether the
    /// bytes were handled.
    func sendAtOnce(_ bytes: SharedBytes, to connection: Connection) -> Bool {
        guard sendsAtOnce, case .lines = connection.transport, connection.descriptor >= 0,
            connection.pending.isEmpty, !connection.pending.isWriting, connection.scheduled == WriteScheduleEntry(),
            !connection.isFinishing
        else { return false }
        let sent = Self.send(
            UnsafeRawBufferPointer(start: bytes.pointer, count: bytes.count), to: connection.descriptor)
        if sent == bytes.count { return true }
        guard sent > 0 else { return false }
        connection.pending.append(bytes)
        leaveRestToWrite(connection, sent: sent)
        return true
    }

    private func startTurns() {
        guard let turnHandle, uv_is_active(dc_handle(turnHandle)) == 0 else { return }
        let result = uv_idle_start(turnHandle) { handle in Server.from(handle)?.writeTurns() }
        if result != 0 { writeAllTurns() }
    }

    /// Writes the next slice of the connections in line (a fifth of them, at least 64), with
    /// the writer threads' help when there are any; called once per loop iteration while any
    /// wait.
    func writeTurns() {
        var budget = max(Self.leastWritesPerIteration, schedule.turnsWaiting / Self.iterationsPerPass)
        // The slice is as many as wait, up to the budget.
        if let writerThreads, writerThreads.hasHelpers,
            min(budget, schedule.turnsWaiting) >= Self.leastParallelWrites
        {
            var slice: [Connection] = []
            while budget > 0, let connection = schedule.nextTurn() {
                slice.append(connection)
                budget -= 1
            }
            write(slice, sharedWith: writerThreads)
        } else {
            while budget > 0, let connection = schedule.nextTurn() {
                write(connection)
                budget -= 1
            }
        }
        if schedule.turnsWaiting == 0, let turnHandle { uv_idle_stop(turnHandle) }
        submitPendingJobs()
        flushMarked()
    }

    /// Writes every connection in line, now.
    func writeAllTurns() {
        while let connection = schedule.nextTurn() {
            write(connection)
        }
        if let turnHandle { uv_idle_stop(turnHandle) }
        submitPendingJobs()
        flushMarked()
    }

    /// Writes a slice of connections with the writer threads' help: one vectored write each,
    /// made on whichever thread takes it; then each result is settled here as `startWrite`
    /// settles its own (the rest of a partial write goes to a `uv_write`).
    private func write(_ slice: [Connection], sharedWith writerThreads: WriterThreads) {
        parallelWrites.removeAll(keepingCapacity: true)
        parallelBuffers.removeAll(keepingCapacity: true)
        var taken: [(connection: Connection, chunks: [SharedBytes], bytes: Int)] = []
        taken.reserveCapacity(slice.count)
        for connection in slice where connection.mayStartWrite {
            let descriptor = connection.descriptor
            guard descriptor >= 0 else { continue }
            let chunks = connection.pending.take(limit: Self.buffersPerWrite)
            let first = parallelBuffers.count
            let bytes = WriteBuffers.append(chunks, skipping: 0, to: &parallelBuffers)
            parallelWrites.append(
                WriterThreads.Write(
                    descriptor: descriptor, firstBuffer: first, bufferCount: parallelBuffers.count - first))
            taken.append((connection, chunks, bytes))
        }
        writerThreads.perform(&parallelWrites, buffers: parallelBuffers)
        for (write, taken) in zip(parallelWrites, taken) {
            let connection = taken.connection
            if write.result == taken.bytes {
                connection.pending.writeFinished(bytes: taken.bytes)
                requestCatchUpsIfDrained(connection)
            } else if write.result >= 0 || write.result == -Int(EAGAIN) {
                let written = max(write.result, 0)
                connection.pending.sent(bytes: written)
                queueWrite(of: taken.chunks, skipping: written, to: connection)
            } else {
                connection.pending.writeFinished(bytes: taken.bytes)
                close(connection)
            }
        }
        // What did not fit in one write, and the connections that had nothing to write.
        for connection in slice {
            write(connection)
        }
    }

    // MARK: - Lingering event streams

    /// Whether a connection's new bytes may wait up to `streamLingerMilliseconds`: an event
    /// stream (SSE or WebSocket, on TCP with `TCP_NODELAY`) with no answer queued, little
    /// queued and no write in flight. One write at a time, every event would otherwise be one
    /// syscall and one TCP segment per subscriber (Nagle would coalesce them, but holds a segment
    /// for the peer's delayed ACK, which is the tail latency); lingering, a subscriber gets the
    /// events of the last millisecond in one write.
    func mayLinger(_ connection: Connection) -> Bool {
        lingerTimer != nil && connection.mayLinger && !connection.pending.isWriting && !connection.isFinishing
            && connection.unsentBytes < Self.lingerBytes
    }

    /// Queued bytes past which a stream is written at once.
    static let lingerBytes = 64 * 1024

    /// How long new events wait before the lingering streams are written: `stream_linger_ms`,
    /// or, after a flush of small writes that the kernel took whole, a third of what that flush
    /// took when it is longer (up to `maximumLingerMilliseconds`). Writing a thousand streams
    /// takes the loop milliseconds, in which it reads nothing; one write at a time, each flush
    /// would then carry one small event per stream. Lingering a third of that, the loop reads
    /// the writes that arrive meanwhile, and the next flush carries all their events in one
    /// write per stream. A small fan-out (a flush of microseconds) waits no longer than the
    /// setting. A flush of larger writes (a pipelining publisher's coalesced versions) already
    /// spreads each syscall over many bytes, and one that left a write over for `uv_write`
    /// has readers for its bottleneck, whose socket buffers coalesce already: waiting longer
    /// would only delay their events.
    static func lingerMilliseconds(configured: UInt64, after flush: LingerFlush) -> UInt64 {
        guard flush.wroteWhole, flush.bytesPerStream < Self.smallWriteBytes else { return configured }
        return max(configured, min(flush.nanoseconds / 3_000_000, Self.maximumLingerMilliseconds))
    }

    /// The longest a flush's duration stretches the linger.
    static let maximumLingerMilliseconds: UInt64 = 50

    /// Bytes per stream below which a flush's writes are small: a few events of a few hundred
    /// bytes, each write's syscall and segment most of its cost.
    static let smallWriteBytes = 2048

    private func armLingerTimer() {
        guard let timer = lingerTimer, uv_is_active(dc_handle(timer)) == 0 else { return }
        let delay = Self.lingerMilliseconds(configured: configuration.streamLingerMilliseconds, after: lastLingerFlush)
        let result = uv_timer_start(timer, { timer in Server.from(timer)?.flushLingering() }, delay, 0)
        if result != 0 { flushLingering() }
    }

    /// Writes what the lingering streams queued, and notes how long that took and whether the
    /// kernel took every write whole.
    func flushLingering() {
        let start = uv_hrtime()
        let streams = schedule.takeLingering()
        var wroteWhole = true
        var (written, bytes) = (0, 0)
        for connection in streams {
            written += 1
            bytes += connection.pending.queuedBytes
            write(connection)
            if connection.pending.isWriting { wroteWhole = false }
        }
        lastLingerFlush = LingerFlush(
            nanoseconds: uv_hrtime() &- start, bytesPerStream: written == 0 ? 0 : bytes / written,
            wroteWhole: wroteWhole)
        submitPendingJobs()
        flushMarked()
    }

    /// Writes everything queued, unless a write is already in flight (its completion starts
    /// the next one). The bytes go straight to the socket first (`tryWrite`): when the
    /// kernel takes them all, the usual case, the write costs no request, no callback and no
    /// change of what the loop polls for. What it does not take goes to a `uv_write`.
    func startWrite(_ connection: Connection) {
        while connection.mayStartWrite {
            let attempt = tryWrite(connection)
            if attempt.written == attempt.bytes {
                connection.pending.dropWritten(attempt.buffers, bytes: attempt.bytes)
                requestCatchUpsIfDrained(connection)
                continue
            }
            guard attempt.written >= 0 || attempt.written == Int(UV_EAGAIN.rawValue) else {
                close(connection)
                return
            }
            leaveRestToWrite(connection, sent: max(attempt.written, 0))
            return
        }
    }

    /// Hands the first queued buffers, of which a send took `sent` bytes, to a `uv_write`,
    /// which writes the rest when the socket can take it and keeps the bytes alive meanwhile.
    private func leaveRestToWrite(_ connection: Connection, sent: Int) {
        let chunks = connection.pending.take(limit: Self.buffersPerWrite)
        connection.pending.sent(bytes: sent)
        queueWrite(of: chunks, skipping: sent, to: connection)
    }

    /// Writes the first queued buffers (up to `buffersPerWrite`) to the connection's socket as
    /// far as the kernel takes them now: how many buffers and bytes were tried, and the bytes
    /// written or a negative libuv error (`UV_EAGAIN` when it takes none). One buffer, a
    /// fan-out's usual write, is a `send(2)` straight from the shared bytes, which reaches the
    /// socket without the file layer a `write(2)` goes through and without filling
    /// `writeBuffers`; several go through `uv_try_write` (`writev`). Called only while no
    /// `uv_write` is in flight, so libuv has nothing queued before them.
    private func tryWrite(_ connection: Connection) -> (buffers: Int, bytes: Int, written: Int) {
        if connection.descriptor >= 0, let only = connection.pending.onlyQueued {
            return (1, only.count, Self.send(only, to: connection.descriptor))
        }
        let (count, total) = connection.pending.withQueued(limit: Self.buffersPerWrite) { chunks in
            (chunks.count, WriteBuffers.fill(&writeBuffers, with: chunks, skipping: 0))
        }
        let written = writeBuffers.withUnsafeBufferPointer { buffers in
            uv_try_write(dc_stream(connection.handle), buffers.baseAddress, UInt32(buffers.count))
        }
        return (count, total, Int(written))
    }

    /// Sends `bytes` on a socket without waiting: the bytes the kernel took, or a negated errno
    /// (libuv's errors are negated errnos on Linux).
    private static func send(_ bytes: UnsafeRawBufferPointer, to descriptor: Int32) -> Int {
        var sent: Int
        repeat {
            sent = dc_send_now(descriptor, bytes.baseAddress, bytes.count)
        } while sent < 0 && errno == EINTR
        return sent >= 0 ? sent : -Int(errno)
    }

    /// After a write: the catch-ups of a connection's lagging subscriptions, if it has drained
    /// (`FanOut.requestCatchUpsIfDrained`). Its flag is read here first: nearly no connection
    /// has one, and this runs after every write.
    private func requestCatchUpsIfDrained(_ connection: Connection) {
        if connection.mayHaveLaggingSubscriptions { fanOut.requestCatchUpsIfDrained(connection) }
    }

    /// Buffers taken for one vectored write.
    static let buffersPerWrite = 512

    /// Hands the bytes of `chunks` after the first `skipped` to libuv, which writes them when
    /// the socket can take them; `didWrite` follows.
    func queueWrite(of chunks: [SharedBytes], skipping skipped: Int, to connection: Connection) {
        let byteCount = WriteBuffers.fill(&writeBuffers, with: chunks, skipping: skipped)
        let context = WriteContext(connection: connection.id, chunks: chunks, byteCount: byteCount)
        let request = LoopHandles.makeWrite(keeping: context)
        // libuv copies the buffer descriptors; the bytes stay alive in `context`.
        let result = writeBuffers.withUnsafeBufferPointer { buffers in
            uv_write(request, dc_stream(connection.handle), buffers.baseAddress, UInt32(buffers.count)) {
                request, status in
                guard let request else { return }
                let stream = request.pointee.handle
                guard let context = LoopHandles.finish(request, as: WriteContext.self), let stream,
                    let server = Server.from(stream)
                else { return }
                server.didWrite(context, status: status)
            }
        }
        if result != 0 {
            LoopHandles.abandon(request)
            connection.pending.writeFinished(bytes: byteCount)
            close(connection)
        }
    }

    func didWrite(_ context: WriteContext, status: Int32) {
        guard let connection = connections[context.connection] else { return }
        connection.pending.writeFinished(bytes: context.byteCount)
        if status != 0 {
            close(connection)
            return
        }
        startWrite(connection)
        requestCatchUpsIfDrained(connection)
        resumeReadingIfDrained(connection)
        submitPendingJobs()
        finishIfDone(connection)
    }
}

/// Keeps the bytes of one queued write alive until libuv's write callback.
final class WriteContext {
    let connection: ConnectionID
    let chunks: [SharedBytes]
    /// The bytes handed to libuv (the chunks' bytes less what was written before).
    let byteCount: Int

    init(connection: ConnectionID, chunks: [SharedBytes], byteCount: Int) {
        self.connection = connection
        self.chunks = chunks
        self.byteCount = byteCount
    }
}

/// Describes queued chunks as libuv buffers for one vectored write.
enum WriteBuffers {
    /// A `uv_buf_t` holds at most 4 GiB: a larger event (a snapshot of a huge collection) is
    /// written as several buffers.
    static let largestBuffer = 1 << 30

    /// Replaces `buffers` with the bytes of `chunks` after the first `skipped`, and returns
    /// how many bytes they describe.
    static func fill(
        _ buffers: inout [uv_buf_t], with chunks: some Collection<SharedBytes>, skipping skipped: Int
    ) -> Int {
        buffers.removeAll(keepingCapacity: true)
        return append(chunks, skipping: skipped, to: &buffers)
    }

    /// Appends to `buffers` the bytes of `chunks` after the first `skipped`, and returns how many
    /// bytes they describe.
    static func append(
        _ chunks: some Collection<SharedBytes>, skipping skipped: Int, to buffers: inout [uv_buf_t]
    ) -> Int {
        var toSkip = skipped
        var total = 0
        for chunk in chunks {
            var offset = min(toSkip, chunk.count)
            toSkip -= offset
            while offset < chunk.count {
                let length = min(chunk.count - offset, largestBuffer)
                buffers.append(LoopHandles.buffer(chunk.pointer + offset, count: length))
                offset += length
                total += length
            }
        }
        return total
    }
}

/// What a flush of the lingering streams took (`Server.lingerMilliseconds`).
struct LingerFlush {
    var nanoseconds: UInt64
    /// The bytes written per stream, on average.
    var bytesPerStream: Int
    /// Whether the kernel took every stream's write whole (none was left for a `uv_write`).
    var wroteWhole: Bool
}

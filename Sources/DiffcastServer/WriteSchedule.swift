/// Where a connection stands in the loop's `WriteSchedule`: one value per connection, changed
/// by the schedule only.
struct WriteScheduleEntry: Equatable {
    /// What a connection's queued bytes wait for, once a flush has decided when they go out.
    enum Wait: Equatable {
        /// Nothing: written as soon as it is flushed, or nothing queued.
        case none
        /// The linger timer, at this place among the lingering streams: an event stream's
        /// events, gathered into one write.
        case linger(place: Int)
        /// Its turn, at this place in the line of subscribers.
        case turn(place: Int)
    }

    /// Marked since the last flush: it queued something, and the next flush decides when that
    /// goes out.
    fileprivate(set) var isMarked = false
    fileprivate(set) var wait = Wait.none
}

/// What waits in a `WriteSchedule`: a connection, which keeps its own entry, so that marking it,
/// queueing it and taking its turn cost no lookup (no table of entries by connection, and no
/// look-up of the connection by id on a path taken once per subscriber and version).
protocol WriteScheduled: AnyObject {
    /// Its entry in the schedule. Set by `WriteSchedule` only.
    var scheduled: WriteScheduleEntry { get set }
}

/// The loop's one list of connections with bytes to write, and when each goes out.
///
/// Anything that queues bytes for a connection marks it (`mark`); the loop flushes the marked
/// connections once per turn of its own (`Server.flushMarked`) and decides for each: write it
/// now (an answer, or a connection finishing), let it linger (an event stream's events wait for
/// the linger timer, and leave in one write), or let it wait its turn (a subscriber's events, one
/// slice of the line written per loop iteration). A connection waits for one thing at a time;
/// marked again while it waits, it keeps its place, and what it queued meanwhile leaves with what
/// it queued before, in one write.
///
/// Waiting turns is how one loop keeps up with thousands of subscribers: a version fans out to
/// them a slice per loop iteration (`Server.writeTurns`), and between slices the loop reads and
/// applies the next writes, so a subscriber whose turn comes later gets several versions in one
/// syscall instead of one syscall each.
///
/// The lists leave stale entries behind rather than search themselves: each connection knows its
/// place in the list it waits in, and an entry whose connection waits for something else now, or
/// at another place, is skipped when its list is drained.
///
/// Never copied: the schedule owns the connections in its line of turns (`order`), and lets go of
/// those still there when it goes away.
struct WriteSchedule<Writer: WriteScheduled>: ~Copyable {
    /// Connections marked since the last flush, each once.
    private var marked: [Writer] = []
    /// The lingering streams, in the order they began, with stale entries.
    private var lingering: [Writer] = []
    /// The line of turns. Where the next turn is: `order[head]`; the entries before it are spent.
    /// Each entry from `head` on holds its connection retained, and hands that reference over
    /// when its turn is taken (`nextTurn`): a connection moves out of the line with no retain and
    /// no release, and the spent entries, plain pointers, need no destroying when the line is
    /// emptied (a thousand per pass of a fan-out).
    private var order: [Unmanaged<Writer>] = []
    private var head = 0
    /// Entries dropped from the front of `order` so far: an entry's place in line is this plus
    /// its index.
    private var dropped = 0

    /// Connections waiting for their turn.
    private(set) var turnsWaiting = 0
    /// Connections lingering.
    private(set) var lingeringCount = 0

    var hasMarked: Bool { !marked.isEmpty }

    /// Entries the line's storage has room for, spent ones included: what it costs in memory,
    /// which grows with the turns not yet taken, not with those taken.
    var lineStorage: Int { order.capacity }

    // MARK: - Marking and flushing

    /// Marks a connection that queued bytes, unless it is marked already.
    mutating func mark(_ writer: Writer) {
        defer { checkInvariants() }
        guard !writer.scheduled.isMarked else { return }
        writer.scheduled.isMarked = true
        marked.append(writer)
    }

    /// Hands over the marked connections in `batch` (which must be empty; its storage is kept for
    /// the next flush), for the flush to decide each with `linger`, `waitTurn`, `writeNow` or
    /// `skip`. Connections marked meanwhile wait for the next call.
    mutating func takeMarked(into batch: inout [Writer]) {
        swap(&marked, &batch)
    }

    /// The flush skips a marked connection (it is closing): it is unmarked, and waits as before.
    mutating func skip(_ writer: Writer) {
        defer { checkInvariants() }
        writer.scheduled.isMarked = false
    }

    /// The flush writes the connection now: it is unmarked, and waits for nothing any more.
    mutating func writeNow(_ writer: Writer) {
        defer { checkInvariants() }
        writer.scheduled.isMarked = false
        stopWaiting(writer)
    }

    /// The flush lets the connection linger, unless it lingers already.
    mutating func linger(_ writer: Writer) {
        defer { checkInvariants() }
        writer.scheduled.isMarked = false
        if case .linger = writer.scheduled.wait { return }
        stopWaiting(writer)
        writer.scheduled.wait = .linger(place: lingering.count)
        lingeringCount += 1
        lingering.append(writer)
    }

    /// The flush lets the connection wait for its turn, at the back of the line unless it waits
    /// there already.
    mutating func waitTurn(_ writer: Writer) {
        defer { checkInvariants() }
        writer.scheduled.isMarked = false
        if case .turn = writer.scheduled.wait { return }
        stopWaiting(writer)
        dropSpentTurnsIfFull()
        writer.scheduled.wait = .turn(place: dropped + order.count)
        turnsWaiting += 1
        order.append(Unmanaged.passRetained(writer))
    }

    /// Takes the connection out of whatever it waits for (it is written now, or gone). Its entry
    /// stays in its list and is skipped there.
    mutating func stopWaiting(_ writer: Writer) {
        defer { checkInvariants() }
        switch writer.scheduled.wait {
        case .none: return
        case .linger: lingeringCount -= 1
        case .turn: turnsWaiting -= 1
        }
        writer.scheduled.wait = .none
    }

    /// What the counts promise between calls, checked in debug builds
    /// (`DIFFCAST_INTERNAL_CHECKS`): each counts at most the entries of its list, never less
    /// than none.
    private func checkInvariants() {
        #if DIFFCAST_INTERNAL_CHECKS
            precondition(head <= order.count, "the next turn is past the line")
            precondition(turnsWaiting >= 0 && turnsWaiting <= order.count - head, "turns miscounted")
            precondition(lingeringCount >= 0 && lingeringCount <= lingering.count, "lingering streams miscounted")
        #endif
    }

    // MARK: - Lingering

    /// Ends the linger: the connections that were lingering, in the order they began, each
    /// waiting for nothing any more.
    mutating func takeLingering() -> [Writer] {
        defer { checkInvariants() }
        var streams: [Writer] = []
        streams.reserveCapacity(lingeringCount)
        for (place, writer) in lingering.enumerated() where writer.scheduled.wait == .linger(place: place) {
            writer.scheduled.wait = .none
            streams.append(writer)
        }
        lingering.removeAll(keepingCapacity: true)
        lingeringCount = 0
        return streams
    }

    // MARK: - Turns

    /// The connection whose turn it is, taken out of the line.
    mutating func nextTurn() -> Writer? {
        defer { checkInvariants() }
        while head < order.count {
            let place = dropped + head
            let writer = order[head].takeRetainedValue()
            head += 1
            if writer.scheduled.wait == .turn(place: place) {
                writer.scheduled.wait = .none
                turnsWaiting -= 1
                return writer
            }
        }
        dropped += order.count
        order.removeAll(keepingCapacity: true)
        head = 0
        return nil
    }

    /// Lets go of the connections whose turn never came.
    deinit {
        for entry in order[head...] { entry.release() }
    }

    /// Drops the spent entries before the line's storage would grow, when they are half of it
    /// or more: the storage then grows only for entries not yet reached, and stays within four
    /// times those (amortized O(1) per turn). A line drained in passes, as a fan-out's is, is
    /// emptied whole at its end (`nextTurn`) and seldom moved.
    private mutating func dropSpentTurnsIfFull() {
        guard order.count == order.capacity, head >= 64, head * 2 >= order.count else { return }
        order.removeFirst(head)
        dropped += head
        head = 0
    }
}

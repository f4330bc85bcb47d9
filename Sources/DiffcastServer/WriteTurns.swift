/// What waits in `WriteTurns`: a connection, which keeps its own place in line.
protocol TurnTaking: AnyObject {
    /// Its place in the line it waits in, nil when it waits in none. Set by `WriteTurns` only.
    var turnPlace: Int? { get set }
}

/// Connections whose queued events wait for their turn to be written, first come first served.
/// A connection waits in one place: queued again while it waits, it keeps that place, and the
/// events queued meanwhile leave with the ones before them in one write.
///
/// This is how one loop keeps up with a thousand subscribers: a version fans out to them a
/// slice per loop iteration (`Server.writeTurns`), and between slices the loop reads and
/// applies the next writes, so a subscriber whose turn comes later gets several versions in
/// one syscall instead of one syscall each. Answers never wait here.
///
/// A connection keeps its place itself (`TurnTaking`), so that queueing it and taking its turn
/// cost no lookup: no table of places by connection, and no look-up of the connection by id
/// when its turn comes, on a path taken once per subscriber and version.
struct WriteTurns<Taker: TurnTaking> {
    private var order: [Taker] = []
    /// Where the next turn is in `order`; the entries before it are spent.
    private var head = 0
    /// Entries dropped from the front of `order` so far: an entry's place in line is this plus
    /// its index. An entry whose taker waits at another place (or not at all) was left behind
    /// by `remove`, and is skipped.
    private var dropped = 0

    /// Connections waiting.
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }

    /// Puts a connection at the back, unless it is waiting already.
    mutating func enqueue(_ taker: Taker) {
        guard taker.turnPlace == nil else { return }
        taker.turnPlace = dropped + order.count
        order.append(taker)
        count += 1
    }

    /// Takes a connection out of the line (it is written now, or gone).
    mutating func remove(_ taker: Taker) {
        guard taker.turnPlace != nil else { return }
        taker.turnPlace = nil
        count -= 1
    }

    /// The connection whose turn it is, taken out of the line.
    mutating func next() -> Taker? {
        while head < order.count {
            let taker = order[head]
            let place = dropped + head
            head += 1
            if taker.turnPlace == place {
                taker.turnPlace = nil
                count -= 1
                compactIfMostlySpent()
                return taker
            }
        }
        dropped += order.count
        order.removeAll(keepingCapacity: true)
        head = 0
        return nil
    }

    /// Drops the spent entries once they are most of the storage, so that `order` stays within
    /// about twice the entries not yet reached (amortized O(1) per turn).
    private mutating func compactIfMostlySpent() {
        guard head >= 64, head * 2 >= order.count else { return }
        order.removeFirst(head)
        dropped += head
        head = 0
    }
}

import DiffcastEngine

/// Connections whose queued events wait for their turn to be written, first come first served.
/// A connection waits in one place: queued again while it waits, it keeps that place, and the
/// events queued meanwhile leave with the ones before them in one write.
///
/// This is how one loop keeps up with a thousand subscribers: a version fans out to them a
/// slice per loop iteration (`Server.writeTurns`), and between slices the loop reads and
/// applies the next writes, so a subscriber whose turn comes later gets several versions in
/// one syscall instead of one syscall each. Answers never wait here.
struct WriteTurns {
    private var order: [ConnectionID] = []
    /// Where the next turn is in `order`; the entries before it are spent.
    private var head = 0
    /// Entries dropped from the front of `order` so far: an entry's place in line is this plus
    /// its index.
    private var dropped = 0
    /// The connections waiting, with their place in line. An entry of `order` whose connection
    /// waits at another place (or not at all) was left behind by `remove`, and is skipped.
    private var places: [ConnectionID: Int] = [:]

    var isEmpty: Bool { places.isEmpty }

    /// Connections waiting.
    var count: Int { places.count }

    /// Puts a connection at the back, unless it is waiting already.
    mutating func enqueue(_ id: ConnectionID) {
        guard places[id] == nil else { return }
        places[id] = dropped + order.count
        order.append(id)
    }

    /// Takes a connection out of the line (it is written now, or gone).
    mutating func remove(_ id: ConnectionID) {
        places[id] = nil
    }

    /// The connection whose turn it is, taken out of the line.
    mutating func next() -> ConnectionID? {
        while head < order.count {
            let id = order[head]
            let place = dropped + head
            head += 1
            if places[id] == place {
                places[id] = nil
                compactIfMostlySpent()
                return id
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

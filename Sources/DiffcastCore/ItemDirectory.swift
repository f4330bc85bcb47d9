/// Which chunk holds each item of a document: what makes a write to one item cost what it
/// touches, at any collection size.
///
/// An open-addressing table of 16-byte slots (the identifier's cached 64-bit hash and the
/// chunk) with linear probing, at most 70% full and of any size (a hash is mapped onto the
/// slots by a multiply, not a mask): 23 bytes per item at a million items, where a
/// `Dictionary<Identifier, ItemLocation>` spent 117. Identifiers are not stored; a slot is
/// matched by hash, and whoever reads it confirms the item in the chunk. Two
/// identifiers of one document with the same 64-bit hash (seeded per process, so nobody can
/// aim for it) do not share a slot: the later one is kept in `overflow`, by identifier.
///
/// It grows a few slots at a time, as Redis's dictionaries rehash a few buckets per operation:
/// when it is full, the slots become `outgoing` and a table twice the entries takes their
/// place; each later `add` moves the next few outgoing slots across, and a lookup that misses
/// the new table looks in the part of `outgoing` not yet moved. Moving a whole directory at once
/// stalled the loop for milliseconds at a few hundred thousand items.
@usableFromInline struct ItemDirectory: Sendable {
    private struct Slot: Sendable {
        /// `free` or `removed`, or an identifier's hash (`slotHash`).
        var hash: UInt64
        var chunk: ItemList.ChunkID
    }

    /// A slot that holds nothing.
    private static let free: UInt64 = 0
    /// An outgoing slot whose entry was removed before it was moved: it holds nothing, and a
    /// probe goes on past it (a free slot would cut off the entries after it).
    private static let removed: UInt64 = 1

    private var slots: [Slot] = []
    /// While the directory grows, the slots it had before (nothing otherwise).
    private var outgoing: [Slot] = []
    /// The outgoing slots before this one have been moved into `slots` (or held nothing); they
    /// stay as they were, so that a probe past them reaches the entries after them.
    private var outgoingMoved = 0
    private var overflow: [Identifier: ItemList.ChunkID] = [:]
    /// Identifiers with an entry (in `slots`, in the outgoing slots not moved yet, or in
    /// `overflow`).
    @usableFromInline private(set) var count = 0

    /// Outgoing slots moved per `add`: the outgoing table is empty long before the new one fills
    /// (it takes twice the entries the outgoing one held).
    private static let slotsMovedPerAdd = 8

    /// Outgoing slots not moved yet: none unless the directory is growing.
    var outgoingSlotsLeft: Int { outgoing.count - outgoingMoved }

    init(capacity: Int = 0) {
        if capacity > 0 { slots = Self.emptySlots(Self.slotCount(for: capacity)) }
    }

    /// The chunk recorded for `id` or, rarely, for another identifier with the same hash: the
    /// caller confirms the item in it.
    func candidateChunk(of id: Identifier) -> ItemList.ChunkID? {
        if !overflow.isEmpty, let chunk = overflow[id] { return chunk }
        switch place(of: Self.hash(id)) {
        case .inSlots(let index): return slots[index].chunk
        case .outgoing(let index): return outgoing[index].chunk
        case nil: return nil
        }
    }

    /// Starts loading the slot where `add` or a lookup of the identifier with hash `hash`
    /// (`Identifier.hashBits`) probes first: called a few identifiers ahead of a run of adds (as
    /// `IdentifierTable.prefetch`), so a million-item `apply` waits for its cache misses together
    /// rather than one by one.
    func prefetch(hash: UInt64) {
        guard !slots.isEmpty else { return }
        slots.prefetch(Self.home(Self.slotHash(hash), in: slots.count))
    }

    /// Records `chunk` for `id`, which has no entry. Returns false when another identifier
    /// holds a slot with the same hash (`id` then goes to `overflow`): a caller that is not
    /// sure `id` is new checks that case.
    @discardableResult
    mutating func add(_ id: Identifier, chunk: ItemList.ChunkID) -> Bool {
        if (count + 1) * 10 > slots.count * 7 {
            grow(to: Self.slotCount(for: 2 * (count + 1)))
        } else if !outgoing.isEmpty {
            moveOutgoing(Self.slotsMovedPerAdd)
        }
        count += 1
        let hash = Self.hash(id)
        guard place(of: hash) == nil else {
            overflow[id] = chunk
            return false
        }
        insert(Slot(hash: hash, chunk: chunk))
        return true
    }

    /// Records `chunk` for `id`, which has an entry.
    mutating func move(_ id: Identifier, to chunk: ItemList.ChunkID) {
        if !overflow.isEmpty, overflow[id] != nil {
            overflow[id] = chunk
            return
        }
        switch place(of: Self.hash(id)) {
        case .inSlots(let index): slots[index].chunk = chunk
        case .outgoing(let index): outgoing[index].chunk = chunk
        case nil: break
        }
    }

    /// Forgets `id`, which has an entry.
    mutating func remove(_ id: Identifier) {
        if !overflow.isEmpty, overflow.removeValue(forKey: id) != nil {
            count -= 1
            return
        }
        switch place(of: Self.hash(id)) {
        case .inSlots(let index):
            count -= 1
            removeSlot(at: index)
        case .outgoing(let index):
            count -= 1
            outgoing[index] = Slot(hash: Self.removed, chunk: 0)
        case nil:
            break
        }
    }

    // MARK: - Slots

    /// Where an entry is: in `slots`, or in an outgoing slot not moved yet.
    private enum Place: Equatable {
        case inSlots(Int)
        case outgoing(Int)
    }

    private func place(of hash: UInt64) -> Place? {
        if let index = Self.index(of: hash, in: slots) { return .inSlots(index) }
        // A match among the outgoing slots already moved is a stale copy: the entry is in
        // `slots` now, or was removed since.
        if !outgoing.isEmpty, let index = Self.index(of: hash, in: outgoing), index >= outgoingMoved {
            return .outgoing(index)
        }
        return nil
    }

    private mutating func insert(_ slot: Slot) {
        var index = Self.home(slot.hash, in: slots.count)
        while slots[index].hash != Self.free { index = successor(index, in: slots.count) }
        slots[index] = slot
    }

    /// Backward-shift deletion: pulls later slots of the probe run into the hole, so a lookup in
    /// `slots` never needs tombstones.
    private mutating func removeSlot(at index: Int) {
        var free = index
        var next = successor(free, in: slots.count)
        while slots[next].hash != Self.free {
            let home = Self.home(slots[next].hash, in: slots.count)
            if distance(from: home, to: next, in: slots.count) >= distance(from: free, to: next, in: slots.count) {
                slots[free] = slots[next]
                free = next
            }
            next = successor(next, in: slots.count)
        }
        slots[free] = Slot(hash: Self.free, chunk: 0)
    }

    /// Makes the current slots outgoing and starts a table of `size`; what was still outgoing
    /// (never, unless the entries doubled before it was moved) is moved first.
    private mutating func grow(to size: Int) {
        if !outgoing.isEmpty { moveOutgoing(outgoing.count) }
        outgoing = slots
        outgoingMoved = 0
        slots = Self.emptySlots(size)
        if outgoing.isEmpty { return }
        moveOutgoing(Self.slotsMovedPerAdd)
    }

    /// Moves the next `limit` outgoing slots' entries into `slots`; the outgoing table goes once
    /// every slot is moved.
    private mutating func moveOutgoing(_ limit: Int) {
        let end = min(outgoing.count, outgoingMoved + limit)
        while outgoingMoved < end {
            let slot = outgoing[outgoingMoved]
            outgoingMoved += 1
            if slot.hash > Self.removed { insert(slot) }
        }
        if outgoingMoved == outgoing.count {
            outgoing = []
            outgoingMoved = 0
        }
    }

    private static func emptySlots(_ count: Int) -> [Slot] {
        Array(repeating: Slot(hash: free, chunk: 0), count: count)
    }

    private static func hash(_ id: Identifier) -> UInt64 {
        slotHash(id.hashBits)
    }

    /// An identifier's hash as a slot holds it: `free` and `removed` are taken as 2 (two
    /// identifiers with the same slot hash are told apart by `overflow`).
    private static func slotHash(_ bits: UInt64) -> UInt64 {
        bits <= removed ? 2 : bits
    }

    /// Slots for `entries` at 70% at most.
    private static func slotCount(for entries: Int) -> Int {
        max(2, (entries * 10 + 6) / 7)
    }

    /// Where the probe for `hash` starts in a table of `size` slots: the hash scaled onto them.
    private static func home(_ hash: UInt64, in size: Int) -> Int {
        Int(truncatingIfNeeded: hash.multipliedFullWidth(by: UInt64(size)).high)
    }

    private func successor(_ index: Int, in size: Int) -> Int {
        index + 1 == size ? 0 : index + 1
    }

    /// Steps from `start` forward to `end` in a table of `size` slots, wrapping at its end.
    private func distance(from start: Int, to end: Int, in size: Int) -> Int {
        end >= start ? end - start : end + size - start
    }

    /// The slot of `table` holding `hash`, found by probing from its home past every slot that
    /// is not free.
    private static func index(of hash: UInt64, in table: [Slot]) -> Int? {
        guard !table.isEmpty else { return nil }
        var index = home(hash, in: table.count)
        while table[index].hash != free {
            if table[index].hash == hash { return index }
            index = index + 1 == table.count ? 0 : index + 1
        }
        return nil
    }
}

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
@usableFromInline struct ItemDirectory: Sendable {
    private struct Slot: Sendable {
        /// 0: the slot is free (a hash of 0 is taken as 1).
        var hash: UInt64
        var chunk: ItemList.ChunkID
    }

    private var slots: [Slot] = []
    private var overflow: [Identifier: ItemList.ChunkID] = [:]
    /// Identifiers with an entry (in a slot or in `overflow`).
    @usableFromInline private(set) var count = 0

    init(capacity: Int = 0) {
        if capacity > 0 { resize(to: Self.slotCount(for: capacity)) }
    }

    /// The chunk recorded for `id` or, rarely, for another identifier with the same hash: the
    /// caller confirms the item in it.
    func candidateChunk(of id: Identifier) -> ItemList.ChunkID? {
        if !overflow.isEmpty, let chunk = overflow[id] { return chunk }
        guard let index = index(of: Self.hash(id)) else { return nil }
        return slots[index].chunk
    }

    /// Starts loading the slot where `add` or a lookup of the identifier with hash `hash`
    /// (`Identifier.hashBits`) probes first: called a few identifiers ahead of a run of adds (as
    /// `IdentifierTable.prefetch`), so a million-item `apply` waits for its cache misses together
    /// rather than one by one.
    func prefetch(hash: UInt64) {
        guard !slots.isEmpty else { return }
        slots.prefetch(home(Self.slotHash(hash)))
    }

    /// Records `chunk` for `id`, which has no entry. Returns false when another identifier
    /// holds a slot with the same hash (`id` then goes to `overflow`): a caller that is not
    /// sure `id` is new checks that case.
    @discardableResult
    mutating func add(_ id: Identifier, chunk: ItemList.ChunkID) -> Bool {
        if (count + 1) * 10 > slots.count * 7 { resize(to: Self.slotCount(for: 2 * (count + 1))) }
        count += 1
        let hash = Self.hash(id)
        guard index(of: hash) == nil else {
            overflow[id] = chunk
            return false
        }
        slots[freeIndex(for: hash)] = Slot(hash: hash, chunk: chunk)
        return true
    }

    /// Records `chunk` for `id`, which has an entry.
    mutating func move(_ id: Identifier, to chunk: ItemList.ChunkID) {
        if !overflow.isEmpty, overflow[id] != nil {
            overflow[id] = chunk
        } else if let index = index(of: Self.hash(id)) {
            slots[index].chunk = chunk
        }
    }

    /// Forgets `id`, which has an entry.
    mutating func remove(_ id: Identifier) {
        if !overflow.isEmpty, overflow.removeValue(forKey: id) != nil {
            count -= 1
            return
        }
        guard var free = index(of: Self.hash(id)) else { return }
        count -= 1
        // Backward-shift deletion: pull later slots of the probe run into the hole, so a
        // lookup never needs tombstones.
        var next = successor(free)
        while slots[next].hash != 0 {
            if distance(from: home(slots[next].hash), to: next) >= distance(from: free, to: next) {
                slots[free] = slots[next]
                free = next
            }
            next = successor(next)
        }
        slots[free] = Slot(hash: 0, chunk: 0)
    }

    private static func hash(_ id: Identifier) -> UInt64 {
        slotHash(id.hashBits)
    }

    /// An identifier's hash as a slot holds it (0 marks a free slot, so it is taken as 1).
    private static func slotHash(_ bits: UInt64) -> UInt64 {
        bits == 0 ? 1 : bits
    }

    /// Slots for `entries` at 70% at most.
    private static func slotCount(for entries: Int) -> Int {
        max(2, (entries * 10 + 6) / 7)
    }

    /// Where the probe for `hash` starts: the hash scaled onto the slots.
    private func home(_ hash: UInt64) -> Int {
        Int(truncatingIfNeeded: hash.multipliedFullWidth(by: UInt64(slots.count)).high)
    }

    private func successor(_ index: Int) -> Int {
        index + 1 == slots.count ? 0 : index + 1
    }

    /// Steps from `start` forward to `end`, wrapping at the end of the slots.
    private func distance(from start: Int, to end: Int) -> Int {
        end >= start ? end - start : end + slots.count - start
    }

    private func index(of hash: UInt64) -> Int? {
        guard !slots.isEmpty else { return nil }
        var index = home(hash)
        while slots[index].hash != 0 {
            if slots[index].hash == hash { return index }
            index = successor(index)
        }
        return nil
    }

    private func freeIndex(for hash: UInt64) -> Int {
        var index = home(hash)
        while slots[index].hash != 0 { index = successor(index) }
        return index
    }

    private mutating func resize(to size: Int) {
        let old = slots
        slots = Array(repeating: Slot(hash: 0, chunk: 0), count: size)
        for slot in old where slot.hash != 0 {
            slots[freeIndex(for: slot.hash)] = slot
        }
    }
}

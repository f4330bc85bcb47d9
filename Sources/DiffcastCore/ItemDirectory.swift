import CPrefetch
import Glibc

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
/// the new table looks in the part of `outgoing` not yet moved. So no single write pays for
/// moving the whole directory, which takes milliseconds at a few hundred thousand items: time in
/// which no subscriber is written. While it grows it holds both tables, until about a fifth of
/// the entries it held have been added. A new table comes zeroed from `calloc` (`Storage`), so
/// making one costs no pass over it either.
@usableFromInline struct ItemDirectory: Sendable {
    private struct Slot: Sendable {
        /// `free` or `removed`, or an identifier's hash (`slotHash`).
        var hash: UInt64
        var chunk: ItemList.ChunkID
    }

    /// A slot that holds nothing: all zero bits, as `calloc` hands memory out.
    private static let free: UInt64 = 0
    /// An outgoing slot whose entry was removed before it was moved: it holds nothing, and a
    /// probe goes on past it (a free slot would cut off the entries after it).
    private static let removed: UInt64 = 1

    /// Slots in memory the allocator hands out zeroed (every slot free), shared by copies of a
    /// directory until one of them writes (`makeUnique`). A large table is fresh pages, which
    /// the kernel zeroes as each is first touched: making one costs no pass over it, where an
    /// array's `init(repeating:count:)` writes every slot (10 ms for the 27 MB of a directory
    /// growing past 600,000 items, in which the loop writes to no subscriber).
    private final class Storage: @unchecked Sendable {
        let slots: UnsafeMutableBufferPointer<Slot>
        /// Whether `calloc` made the memory (else `allocate`, when `calloc` found none).
        private let isZeroAllocated: Bool

        init(count: Int) {
            if count > 0, let memory = calloc(count, MemoryLayout<Slot>.stride) {
                let start = memory.bindMemory(to: Slot.self, capacity: count)
                slots = UnsafeMutableBufferPointer(start: start, count: count)
                isZeroAllocated = true
            } else {
                slots = .allocate(capacity: count)
                slots.initialize(repeating: Slot(hash: ItemDirectory.free, chunk: 0))
                isZeroAllocated = false
            }
        }

        init(copying other: Storage) {
            slots = .allocate(capacity: other.slots.count)
            _ = slots.initialize(from: other.slots)
            isZeroAllocated = false
        }

        deinit {
            if isZeroAllocated { Glibc.free(slots.baseAddress) } else { slots.deallocate() }
        }
    }

    private var table = Storage(count: 0)
    /// While the directory grows, the slots it had before (nil otherwise).
    private var outgoing: Storage?
    /// The outgoing slots before this one have been moved into `table` (or held nothing); they
    /// stay as they were, so that a probe past them reaches the entries after them.
    private var outgoingMoved = 0
    private var overflow: [Identifier: ItemList.ChunkID] = [:]
    /// Identifiers with an entry (in `table`, in the outgoing slots not moved yet, or in
    /// `overflow`).
    @usableFromInline private(set) var count = 0

    /// Outgoing slots moved per `add`: the outgoing table is empty long before the new one fills
    /// (it takes twice the entries the outgoing one held).
    private static let slotsMovedPerAdd = 8

    /// Outgoing slots not moved yet: none unless the directory is growing.
    var outgoingSlotsLeft: Int { (outgoing?.slots.count ?? 0) - outgoingMoved }

    init(capacity: Int = 0) {
        if capacity > 0 { table = Storage(count: Self.slotCount(for: capacity)) }
    }

    /// The chunk recorded for `id` or, rarely, for another identifier with the same hash: the
    /// caller confirms the item in it.
    func candidateChunk(of id: Identifier) -> ItemList.ChunkID? {
        if !overflow.isEmpty, let chunk = overflow[id] { return chunk }
        switch place(of: Self.hash(id)) {
        case .inTable(let index): return table.slots[index].chunk
        case .outgoing(let index): return outgoing?.slots[index].chunk
        case nil: return nil
        }
    }

    /// Starts loading the slot where `add` or a lookup of the identifier with hash `hash`
    /// (`Identifier.hashBits`) probes first: called a few identifiers ahead of a run of adds (as
    /// `IdentifierTable.prefetch`), so a million-item `apply` waits for its cache misses together
    /// rather than one by one.
    func prefetch(hash: UInt64) {
        guard let base = table.slots.baseAddress, !table.slots.isEmpty else { return }
        dc_prefetch(base + Self.home(Self.slotHash(hash), in: table.slots.count))
    }

    /// Records `chunk` for `id`, which has no entry. Returns false when another identifier
    /// holds a slot with the same hash (`id` then goes to `overflow`): a caller that is not
    /// sure `id` is new checks that case.
    @discardableResult
    mutating func add(_ id: Identifier, chunk: ItemList.ChunkID) -> Bool {
        add(hashBits: id.hashBits, chunk: chunk) { id }
    }

    /// `add(_:chunk:)` for the identifier with hash `hashBits` (`Identifier.hashBits`), which
    /// `identifier` reads only when another identifier holds a slot with that hash. A caller
    /// walking a long run of items in place (a whole `apply`) so adds them without copying
    /// their identifiers, which would retain and release each one's text.
    @discardableResult
    mutating func add(hashBits: UInt64, chunk: ItemList.ChunkID, identifier: () -> Identifier) -> Bool {
        makeUnique()
        if (count + 1) * 10 > table.slots.count * 7 {
            grow(to: Self.slotCount(for: 2 * (count + 1)))
        } else if outgoing != nil {
            moveOutgoing(Self.slotsMovedPerAdd)
        }
        count += 1
        let hash = Self.slotHash(hashBits)
        // One probe of the table finds the hash there or the free slot where it goes.
        let slots = table.slots
        var index = Self.home(hash, in: slots.count)
        while slots[index].hash != Self.free {
            if slots[index].hash == hash { return addToOverflow(identifier(), chunk: chunk) }
            index = Self.successor(index, in: slots.count)
        }
        if outgoingIndex(of: hash) != nil { return addToOverflow(identifier(), chunk: chunk) }
        slots[index] = Slot(hash: hash, chunk: chunk)
        return true
    }

    /// Keeps `id` by identifier: another identifier holds a slot with its hash.
    private mutating func addToOverflow(_ id: Identifier, chunk: ItemList.ChunkID) -> Bool {
        overflow[id] = chunk
        return false
    }

    /// Records `chunk` for `id`, which has an entry.
    mutating func move(_ id: Identifier, to chunk: ItemList.ChunkID) {
        if !overflow.isEmpty, overflow[id] != nil {
            overflow[id] = chunk
            return
        }
        makeUnique()
        switch place(of: Self.hash(id)) {
        case .inTable(let index): table.slots[index].chunk = chunk
        case .outgoing(let index): outgoing?.slots[index].chunk = chunk
        case nil: break
        }
    }

    /// Forgets `id`, which has an entry.
    mutating func remove(_ id: Identifier) {
        if !overflow.isEmpty, overflow.removeValue(forKey: id) != nil {
            count -= 1
            return
        }
        makeUnique()
        switch place(of: Self.hash(id)) {
        case .inTable(let index):
            count -= 1
            removeSlot(at: index)
        case .outgoing(let index):
            count -= 1
            outgoing?.slots[index] = Slot(hash: Self.removed, chunk: 0)
        case nil:
            break
        }
    }

    // MARK: - Slots

    /// Where an entry is: in `table`, or in an outgoing slot not moved yet.
    private enum Place: Equatable {
        case inTable(Int)
        case outgoing(Int)
    }

    private func place(of hash: UInt64) -> Place? {
        if let index = Self.index(of: hash, in: table.slots) { return .inTable(index) }
        return outgoingIndex(of: hash).map(Place.outgoing)
    }

    /// The outgoing slot not moved yet that holds `hash`. A match among the outgoing slots
    /// already moved is a stale copy: the entry is in `table` now, or was removed since.
    private func outgoingIndex(of hash: UInt64) -> Int? {
        guard let outgoing, let index = Self.index(of: hash, in: outgoing.slots), index >= outgoingMoved else {
            return nil
        }
        return index
    }

    /// Gives this directory slots of its own before it writes to them (a copy of a directory
    /// shares them until then).
    private mutating func makeUnique() {
        if !isKnownUniquelyReferenced(&table) { table = Storage(copying: table) }
        // Asked before `outgoing` is bound to a name, which would be a second reference.
        if outgoing != nil, !isKnownUniquelyReferenced(&outgoing), let shared = outgoing {
            outgoing = Storage(copying: shared)
        }
    }

    private mutating func insert(_ slot: Slot) {
        let slots = table.slots
        var index = Self.home(slot.hash, in: slots.count)
        while slots[index].hash != Self.free { index = Self.successor(index, in: slots.count) }
        slots[index] = slot
    }

    /// Backward-shift deletion: pulls later slots of the probe run into the hole, so a lookup in
    /// `table` never needs tombstones.
    private mutating func removeSlot(at index: Int) {
        let slots = table.slots
        var free = index
        var next = Self.successor(free, in: slots.count)
        while slots[next].hash != Self.free {
            let fromHome = Self.distance(from: Self.home(slots[next].hash, in: slots.count), to: next, in: slots.count)
            if fromHome >= Self.distance(from: free, to: next, in: slots.count) {
                slots[free] = slots[next]
                free = next
            }
            next = Self.successor(next, in: slots.count)
        }
        slots[free] = Slot(hash: Self.free, chunk: 0)
    }

    /// Makes the current slots outgoing and starts a table of `size`; what was still outgoing
    /// (never, unless the entries doubled before it was moved) is moved first.
    private mutating func grow(to size: Int) {
        if let outgoing { moveOutgoing(outgoing.slots.count) }
        outgoing = table.slots.isEmpty ? nil : table
        outgoingMoved = 0
        table = Storage(count: size)
        moveOutgoing(Self.slotsMovedPerAdd)
    }

    /// Moves the next `limit` outgoing slots' entries into `table`; the outgoing slots go once
    /// every one is moved.
    private mutating func moveOutgoing(_ limit: Int) {
        guard let slots = outgoing?.slots else { return }
        let end = min(slots.count, outgoingMoved + limit)
        while outgoingMoved < end {
            let slot = slots[outgoingMoved]
            outgoingMoved += 1
            if slot.hash > Self.removed { insert(slot) }
        }
        if outgoingMoved == slots.count {
            outgoing = nil
            outgoingMoved = 0
        }
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

    private static func successor(_ index: Int, in size: Int) -> Int {
        index + 1 == size ? 0 : index + 1
    }

    /// Steps from `start` forward to `end` in a table of `size` slots, wrapping at its end.
    private static func distance(from start: Int, to end: Int, in size: Int) -> Int {
        end >= start ? end - start : end + size - start
    }

    /// The slot holding `hash`, found by probing from its home past every slot that is not free.
    private static func index(of hash: UInt64, in slots: UnsafeMutableBufferPointer<Slot>) -> Int? {
        guard !slots.isEmpty else { return nil }
        var index = home(hash, in: slots.count)
        while slots[index].hash != free {
            if slots[index].hash == hash { return index }
            index = successor(index, in: slots.count)
        }
        return nil
    }
}

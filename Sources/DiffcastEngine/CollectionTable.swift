/// The apply queue's collections by name: a hash table of the states themselves, which know
/// their names, in open addressing with linear probing.
///
/// A `[String: CollectionState]` keeps each name again beside its reference, 24 bytes a slot
/// (at 100,000 collections, 262,144 slots at Swift's load factor: some 63 bytes a collection).
/// Here a slot is one reference, 8 bytes. A lookup compares the names of the states it meets,
/// so it reads them where a dictionary reads its keys in place: a collection is looked up once
/// per request, and the state read next anyway.
struct CollectionTable: Sequence {
    /// A power of two in length (or empty), at most three quarters full.
    private var slots: [CollectionState?] = []
    private(set) var count = 0

    init() {}

    subscript(name: String) -> CollectionState? {
        get {
            guard let slot = slot(of: name) else { return nil }
            return slots[slot]
        }
        set {
            if let newValue {
                precondition(newValue.name == name, "a collection is kept under its own name")
                insert(newValue)
            } else {
                removeValue(forKey: name)
            }
        }
    }

    /// Takes the collection named `name` out; the ones after it in its run move back, so that
    /// every run stays unbroken (no tombstones).
    @discardableResult
    mutating func removeValue(forKey name: String) -> CollectionState? {
        guard var hole = slot(of: name) else { return nil }
        let removed = slots[hole]
        slots[hole] = nil
        count -= 1
        let mask = slots.count - 1
        var next = (hole + 1) & mask
        while let state = slots[next] {
            let home = Self.home(of: state.name, mask: mask)
            // The state at `next` stays when its home lies cyclically in (hole, next].
            let stays = hole <= next ? (hole < home && home <= next) : (hole < home || home <= next)
            if !stays {
                slots[hole] = state
                slots[next] = nil
                hole = next
            }
            next = (next + 1) & mask
        }
        return removed
    }

    func makeIterator() -> some IteratorProtocol<CollectionState> {
        slots.lazy.compactMap { $0 }.makeIterator()
    }

    /// Puts `state` in, in place of a collection of the same name.
    private mutating func insert(_ state: CollectionState) {
        if let slot = slot(of: state.name) {
            slots[slot] = state
            return
        }
        if (count + 1) * 4 > slots.count * 3 { grow() }
        place(state)
        count += 1
    }

    /// Puts `state`, whose name is not in the table, in the first free slot of its run.
    private mutating func place(_ state: CollectionState) {
        let mask = slots.count - 1
        var slot = Self.home(of: state.name, mask: mask)
        while slots[slot] != nil { slot = (slot + 1) & mask }
        slots[slot] = state
    }

    private mutating func grow() {
        let old = slots
        slots = Array(repeating: nil, count: Swift.max(8, old.count * 2))
        for case let state? in old { place(state) }
    }

    private func slot(of name: String) -> Int? {
        guard !slots.isEmpty else { return nil }
        let mask = slots.count - 1
        var slot = Self.home(of: name, mask: mask)
        while let state = slots[slot] {
            if state.name == name { return slot }
            slot = (slot + 1) & mask
        }
        return nil
    }

    private static func home(of name: String, mask: Int) -> Int {
        name.hashValue & mask
    }
}

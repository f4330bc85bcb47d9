import CPrefetch

/// An open-addressing hash table from identifiers to positions in a list the caller keeps.
///
/// A slot is 8 bytes: the top 28 bits of the identifier's cached hash and the position. A table
/// of a million identifiers is 16 MB, and a lookup reads one cache line of it; the identifiers
/// stay in the caller's list and are compared only where the hash bits match. This is what
/// makes a full diff cost little more than hashing each identifier once
/// (`Dictionary<Identifier, Int>` keeps a 24-byte key and an 8-byte value per bucket, so a find
/// reads more memory).
///
/// Noncopyable, over memory of its own: an array's storage would be retained and released
/// around every lookup, as the caller's closure might change it.
struct IdentifierTable: ~Copyable {
    private let slots: UnsafeMutableBufferPointer<UInt64>
    private let mask: Int

    /// Bits of a slot that hold the position plus one (0 marks a free slot).
    private static let positionBits = 36
    private static let positionMask: UInt64 = (1 << positionBits) - 1
    /// Positions are below this: 2³⁶ - 1, so a differ's places (a chunk's ordinal and an offset
    /// in it) fit for 134M chunks, more than any document's memory could hold.
    static let positionLimit = Int(positionMask)

    /// A table for up to `capacity` identifiers, at most half full.
    init(capacity: Int) {
        var size = 8
        while size < capacity * 2 { size <<= 1 }
        slots = .allocate(capacity: size)
        slots.initialize(repeating: 0)
        mask = size - 1
    }

    deinit {
        slots.deallocate()
    }

    /// How far ahead of a run of inserts or lookups `prefetch` should be called: enough
    /// lookups in flight to hide a miss to memory, few enough that the lines are still cached.
    static let prefetchDistance = 16

    /// Starts loading the slot where a lookup or insert of an identifier with hash `hash`
    /// (`Identifier.hashBits`) begins. Called `prefetchDistance` identifiers ahead in a long run,
    /// it lets the run's cache misses overlap, which otherwise dominate a full diff of a million
    /// items.
    func prefetch(hash: UInt64) {
        if let base = slots.baseAddress { dc_prefetch(base + (Int(truncatingIfNeeded: hash) & mask)) }
    }

    /// The position stored for the identifier with hash `hash` (`Identifier.hashBits`);
    /// `isIdentifier(position)` says whether the caller's list holds that identifier at a
    /// position, and is asked only where the hash bits match. The caller compares in place, so
    /// no identifier is copied (a copy would retain and release its text).
    func find(hash: UInt64, isIdentifier: (Int) -> Bool) -> Int? {
        var index = Int(truncatingIfNeeded: hash) & mask
        while true {
            let slot = slots[index]
            if slot == 0 { return nil }
            if (slot & ~Self.positionMask) == (hash & ~Self.positionMask) {
                let position = Int(truncatingIfNeeded: slot & Self.positionMask) - 1
                if isIdentifier(position) { return position }
            }
            index = (index + 1) & mask
        }
    }

    /// Stores `position` (below `positionLimit`) for the identifier with hash `hash`, unless the
    /// table already holds it (`isIdentifier` as in `find`): then it changes nothing and returns
    /// the position it holds.
    mutating func insert(hash: UInt64, at position: Int, isIdentifier: (Int) -> Bool) -> Int? {
        precondition(position >= 0 && position < Self.positionLimit, "identifier table position out of range")
        var index = Int(truncatingIfNeeded: hash) & mask
        while true {
            let slot = slots[index]
            if slot == 0 {
                slots[index] = (hash & ~Self.positionMask) | UInt64(position + 1)
                return nil
            }
            if (slot & ~Self.positionMask) == (hash & ~Self.positionMask) {
                let held = Int(truncatingIfNeeded: slot & Self.positionMask) - 1
                if isIdentifier(held) { return held }
            }
            index = (index + 1) & mask
        }
    }
}

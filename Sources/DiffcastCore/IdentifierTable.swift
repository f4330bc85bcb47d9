/// An open-addressing hash table from identifiers to positions in a list the caller keeps.
///
/// A slot is 8 bytes: 32 bits of the identifier's cached hash and the position. A table of a
/// million identifiers is 16 MB, and a lookup reads one cache line of it; the identifiers stay
/// in the caller's list and are compared only where the hash bits match. This is what makes a
/// full diff cost little more than hashing each identifier once (`Dictionary<Identifier, Int>`
/// keeps a 24-byte key and an 8-byte value per bucket, and its finds were a third of a diff).
struct IdentifierTable {
    private var slots: [UInt64]
    private let mask: Int

    /// A table for up to `capacity` identifiers, at most half full.
    init(capacity: Int) {
        var size = 8
        while size < capacity * 2 { size <<= 1 }
        slots = Array(repeating: 0, count: size)
        mask = size - 1
    }

    /// How far ahead of a run of inserts or lookups `prefetch` should be called: enough
    /// lookups in flight to hide a miss to memory, few enough that the lines are still cached.
    static let prefetchDistance = 16

    /// Starts loading the slot where a lookup or insert of an identifier with hash `hash`
    /// (`Identifier.hashBits`) begins. Called `prefetchDistance` identifiers ahead in a long run,
    /// it lets the run's cache misses overlap: they were three quarters of a full diff of a
    /// million items.
    func prefetch(hash: UInt64) {
        slots.prefetch(Int(truncatingIfNeeded: hash) & mask)
    }

    /// The position stored for the identifier with hash `hash` (`Identifier.hashBits`);
    /// `isIdentifier(position)` says whether the caller's list holds that identifier at a
    /// position, and is asked only where the hash bits match. The caller compares in place, so
    /// no identifier is copied (a copy retains its text: that was half of a full diff).
    func find(hash: UInt64, isIdentifier: (Int) -> Bool) -> Int? {
        var index = Int(truncatingIfNeeded: hash) & mask
        while true {
            let slot = slots[index]
            if slot == 0 { return nil }
            if slot >> 32 == hash >> 32 {
                let position = Int(truncatingIfNeeded: slot & 0xffff_ffff) - 1
                if isIdentifier(position) { return position }
            }
            index = (index + 1) & mask
        }
    }

    /// Stores `position` (below 2³² - 1) for the identifier with hash `hash`, unless the table
    /// already holds it (`isIdentifier` as in `find`): then it changes nothing and returns the
    /// position it holds.
    mutating func insert(hash: UInt64, at position: Int, isIdentifier: (Int) -> Bool) -> Int? {
        var index = Int(truncatingIfNeeded: hash) & mask
        while true {
            let slot = slots[index]
            if slot == 0 {
                slots[index] = (hash >> 32) << 32 | UInt64(position + 1)
                return nil
            }
            if slot >> 32 == hash >> 32 {
                let held = Int(truncatingIfNeeded: slot & 0xffff_ffff) - 1
                if isIdentifier(held) { return held }
            }
            index = (index + 1) & mask
        }
    }
}

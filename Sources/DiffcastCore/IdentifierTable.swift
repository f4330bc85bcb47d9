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

    /// The position stored for `id`; `identifierAt` reads the identifier at a position of the
    /// caller's list.
    func find(_ id: Identifier, identifierAt: (Int) -> Identifier) -> Int? {
        let hash = id.hashBits
        var index = Int(truncatingIfNeeded: hash) & mask
        while true {
            let slot = slots[index]
            if slot == 0 { return nil }
            if slot >> 32 == hash >> 32 {
                let position = Int(truncatingIfNeeded: slot & 0xffff_ffff) - 1
                if identifierAt(position) == id { return position }
            }
            index = (index + 1) & mask
        }
    }

    /// Stores `position` (below 2³² - 1) for `id`, unless the table already holds `id`: then
    /// it changes nothing and returns the position it holds.
    mutating func insert(_ id: Identifier, at position: Int, identifierAt: (Int) -> Identifier) -> Int? {
        let hash = id.hashBits
        var index = Int(truncatingIfNeeded: hash) & mask
        while true {
            let slot = slots[index]
            if slot == 0 {
                slots[index] = (hash >> 32) << 32 | UInt64(position + 1)
                return nil
            }
            if slot >> 32 == hash >> 32 {
                let held = Int(truncatingIfNeeded: slot & 0xffff_ffff) - 1
                if identifierAt(held) == id { return held }
            }
            index = (index + 1) & mask
        }
    }
}

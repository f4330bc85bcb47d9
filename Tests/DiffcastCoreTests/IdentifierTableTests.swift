import DiffcastTestSupport
import Testing

@testable import DiffcastCore

/// The differ's identifier table keeps part of each hash and a position in one 64-bit slot.
@Suite struct IdentifierTableTests {
    /// Positions anywhere below the limit come back whole, identifiers whose hashes share the
    /// kept bits (or all bits) are told apart by the caller's comparison, and an identifier
    /// already held is found, not stored twice.
    @Test func positionsUpToTheLimitAreFoundWholeAndIdentifiersToldApart() {
        var rng = SplitMix64(seed: 23)
        let count = 3000
        // A few hashes for many identifiers: every lookup probes past slots of other identifiers.
        let someHashes: [UInt64] = [1, 2, .max, 1 << 40]
        let hashes = (0..<count).map { _ in someHashes[Int.random(in: 0..<someHashes.count, using: &rng)] }
        var positions = (0..<count).map { _ in Int.random(in: 0..<IdentifierTable.positionLimit, using: &rng) }
        positions[0] = IdentifierTable.positionLimit - 1
        positions[1] = 0
        positions[2] = 1 << 33
        var table = IdentifierTable(capacity: count)
        for number in 0..<count {
            let held = table.insert(hash: hashes[number], at: positions[number]) { positions[number] == $0 }
            #expect(held == nil)
        }
        for number in 0..<count {
            let found = table.find(hash: hashes[number]) { positions[number] == $0 }
            #expect(found == positions[number], "identifier \(number)")
            #expect(table.insert(hash: hashes[number], at: 5) { positions[number] == $0 } == positions[number])
        }
        // Kept hash bits unlike any held: the caller is not even asked.
        #expect(table.find(hash: 1 << 50) { _ in true } == nil)
        #expect(table.find(hash: 3) { _ in false } == nil)
    }
}

import DiffcastTestSupport
import Testing

@testable import DiffcastCore

/// The item directory matches slots by a 64-bit hash. With the real, seeded hash two identifiers
/// never share one; these tests force it, with identifiers whose hash is one of a few values.
@Suite struct ItemDirectoryTests {
    /// An identifier whose hash is one of four values (0 among them, which the table remaps).
    private func colliding(_ text: String) -> Identifier {
        Identifier(text, hashForTesting: text.utf8.reduce(0) { $0 &+ Int($1) } % 4)
    }

    @Test func randomAddsMovesAndRemovesAgreeWithADictionary() {
        var rng = SplitMix64(seed: 11)
        var directory = ItemDirectory()
        var model: [Identifier: ItemList.ChunkID] = [:]
        // 64 identifiers over 56 hashes, half of them starting their probe at the last slot and
        // half at the first: some share a hash, and the rest make one long run that wraps.
        let pool = (0..<64).map { number in
            let small = UInt64(number % 56)
            let hash = number.isMultiple(of: 2) ? UInt64.max - small : small
            return Identifier("id\(number)", hashForTesting: Int(truncatingIfNeeded: hash))
        }
        var removals = 0
        for step in 0..<5000 {
            let id = pool[Int.random(in: 0..<pool.count, using: &rng)]
            let chunk = ItemList.ChunkID.random(in: 1...1000, using: &rng)
            if model[id] == nil {
                directory.add(id, chunk: chunk)
                model[id] = chunk
            } else if Bool.random(using: &rng) {
                directory.move(id, to: chunk)
                model[id] = chunk
            } else {
                directory.remove(id)
                model[id] = nil
                removals += 1
            }
            #expect(directory.count == model.count, "step \(step)")
            for (present, expected) in model {
                #expect(directory.candidateChunk(of: present) == expected, "step \(step): \(present)")
            }
        }
        #expect(removals > 1000)
    }

    /// The law: what a document does cannot depend on how its identifiers hash. The same random
    /// writes go to a document with real hashes and to one whose identifiers share four hashes;
    /// every write must succeed or fail alike, and the states must stay equal.
    @Test(arguments: 0..<4)
    func writesDoTheSameWhateverTheHashes(seed: Int) throws {
        var realRNG = SplitMix64(seed: UInt64(seed) &+ 101)
        var collidingRNG = realRNG
        var real = Document()
        var shared = Document()
        var failures = 0
        for step in 0..<1500 {
            let realWrite = randomWrite(real, using: &realRNG)
            let collidingWrite = randomWrite(shared, using: &collidingRNG, identifier: colliding)
            let realResult = Result { () throws(DiffcastError) in try real.apply(realWrite) }
            let collidingResult = Result { () throws(DiffcastError) in try shared.apply(collidingWrite) }
            switch (realResult, collidingResult) {
            case (.success, .success): break
            case (.failure(let first), .failure(let second)):
                #expect("\(first)" == "\(second)", "step \(step)")
                failures += 1
            default:
                Issue.record("step \(step): \(realResult) with real hashes, \(collidingResult) with shared ones")
                return
            }
            #expect(itemIDs(real.snapshot) == itemIDs(shared.snapshot), "step \(step)")
            #expect(real.itemCount == shared.itemCount, "step \(step)")
            for section in shared.snapshot.sections {
                for (index, item) in section.items.enumerated() {
                    #expect(shared.location(of: item.id)?.item == index, "step \(step): \(item.id)")
                }
            }
        }
        #expect(failures > 50)
    }
}

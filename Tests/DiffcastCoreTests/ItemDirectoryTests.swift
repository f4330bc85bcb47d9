import DiffcastTestSupport
import Testing

@testable import DiffcastCore

/// The item directory matches slots by a 64-bit hash. With the real, seeded hash two identifiers
/// never share one; these tests force it, with identifiers whose hash is one of a few values.
@Suite struct ItemDirectoryTests {
    /// An identifier whose hash is one of four values (0 and 1 among them, which the table remaps).
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

    /// Growing: random adds, moves and removes to 30,000 identifiers with real hashes, checked
    /// against a dictionary while the directory grows (the outgoing slots not moved yet,
    /// removals among them, identifiers removed and added again). Every identifier held is
    /// found with its chunk, and none that was removed is found.
    @Test func lookupsAgreeWithADictionaryWhileTheDirectoryGrows() {
        var rng = SplitMix64(seed: 5)
        var directory = ItemDirectory()
        var model: [Identifier: ItemList.ChunkID] = [:]
        let pool = (0..<30_000).map { Identifier("item-\($0)") }
        var stepsWhileGrowing = 0
        for step in 0..<120_000 {
            let id = pool[Int.random(in: 0..<min(pool.count, 200 + step / 2), using: &rng)]
            let chunk = ItemList.ChunkID.random(in: 1...1000, using: &rng)
            if model[id] == nil {
                let addedToASlot = directory.add(id, chunk: chunk)
                #expect(addedToASlot, "step \(step)")
                model[id] = chunk
            } else if Int.random(in: 0..<4, using: &rng) == 0 {
                directory.move(id, to: chunk)
                model[id] = chunk
            } else if Int.random(in: 0..<3, using: &rng) == 0 {
                directory.remove(id)
                model[id] = nil
            }
            if directory.outgoingSlotsLeft > 0 { stepsWhileGrowing += 1 }
            #expect(directory.count == model.count, "step \(step)")
            #expect(directory.candidateChunk(of: id) == model[id], "step \(step): \(id)")
            if step % 10_000 == 0 || (directory.outgoingSlotsLeft > 0 && step % 97 == 0) {
                for other in pool.prefix(200 + step / 2) {
                    #expect(directory.candidateChunk(of: other) == model[other], "step \(step): \(other)")
                }
            }
        }
        #expect(model.count > 10_000)
        #expect(stepsWhileGrowing > 10_000, "the checks ran while the directory grew")
    }

    /// What makes growth incremental: a directory that fills hands its slots over to the new
    /// table 8 per add afterwards, not all at once, and the old table is gone long before the
    /// new one fills (golden sizes: a table holds at most 70% of its slots).
    @Test func growthMovesEightOutgoingSlotsPerAdd() {
        var directory = ItemDirectory()
        var growths = 0
        var previousLeft = 0
        for number in 0..<50_000 {
            directory.add(Identifier("n\(number)"), chunk: 1)
            let left = directory.outgoingSlotsLeft
            if left > previousLeft {
                growths += 1
                // The outgoing table is the one that filled, 8 of its slots moved with this add:
                // one more entry than its `number` would have put it over 70%.
                let slots = left + 8
                #expect((number + 1) * 10 > slots * 7 && number * 10 <= slots * 7, "add \(number): \(slots) slots")
                #expect(previousLeft == 0, "add \(number): growing again before the last growth ended")
            } else if previousLeft > 0 {
                #expect(left == max(0, previousLeft - 8), "add \(number)")
            }
            previousLeft = left
        }
        #expect(growths >= 10)
    }

    /// A directory is a value: a copy, taken while the original grows (its outgoing slots not
    /// all moved), keeps what it held whatever is written to either afterwards.
    @Test func aCopyKeepsItsEntriesWhenEitherIsWritten() {
        var original = ItemDirectory()
        let ids = (0..<1_000).map { Identifier("c\($0)") }
        var added = 0
        // Up to the first growth past 100 entries: its new table holds a few entries, and most
        // are still in its outgoing slots.
        while added < 100 || original.outgoingSlotsLeft == 0 {
            original.add(ids[added], chunk: 1)
            added += 1
        }
        var copy = original
        for (number, id) in ids.prefix(added).enumerated() {
            if number.isMultiple(of: 2) { original.move(id, to: 2) }
            if number.isMultiple(of: 3) { copy.remove(id) }
        }
        for (number, id) in ids.prefix(added).enumerated() {
            #expect(original.candidateChunk(of: id) == (number.isMultiple(of: 2) ? 2 : 1), "\(id) in the original")
            #expect(copy.candidateChunk(of: id) == (number.isMultiple(of: 3) ? nil : 1), "\(id) in the copy")
        }
        #expect(original.count == added && copy.count == added - (added + 2) / 3)
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

import DiffcastTestSupport
import Testing

@testable import DiffcastCore

@Suite struct ChunkTableTests {
    /// Appends, replacements, removals and in-place changes across page boundaries, on copies
    /// that share pages: each copy holds what a plain array given the same operations holds.
    @Test func everyCopyStaysAnArrayOfItsOwn() {
        var rng = SplitMix64(seed: 11)
        func chunk() -> ItemList.Chunk { ItemList.Chunk(items: [Item(id: "c")]) }
        var tables = [ChunkTable()]
        var models: [[ItemList.Chunk]] = [[]]
        for step in 0..<600 {
            let which = Int.random(in: 0..<tables.count, using: &rng)
            let count = models[which].count
            switch Int.random(in: 0..<6, using: &rng) {
            case 0 where tables.count < 6:
                tables.append(tables[which])
                models.append(models[which])
            case 1, 2:
                for _ in 0..<Int.random(in: 1...70, using: &rng) {
                    let new = chunk()
                    tables[which].append(new)
                    models[which].append(new)
                }
            case 3 where count > 0:
                let lower = Int.random(in: 0..<count, using: &rng)
                let upper = Int.random(in: lower...min(count, lower + 3), using: &rng)
                let new = (0..<Int.random(in: 0...3, using: &rng)).map { _ in chunk() }
                tables[which].replaceSubrange(lower..<upper, with: new)
                models[which].replaceSubrange(lower..<upper, with: new)
            case 4 where count > 0:
                let position = Int.random(in: 0..<count, using: &rng)
                let item = Item(id: "n\(step)")
                tables[which].update(position) { $0.append(contentsOf: [item]) }
                models[which][position].append(contentsOf: [item])
            case 5 where count > 0:
                let doomed = Set(models[which].shuffled(using: &rng).prefix(5).map(\.id))
                tables[which].removeAll { doomed.contains($0.id) }
                models[which].removeAll { doomed.contains($0.id) }
            default:
                if count > 0 {
                    let position = Int.random(in: 0..<count, using: &rng)
                    tables[which].remove(at: position)
                    models[which].remove(at: position)
                }
            }
            // The copy just changed is compared at every step, every copy at every 10th: a write
            // that damaged pages another copy shares leaves that copy wrong until it is checked.
            let checked = step % 10 == 9 ? Array(tables.indices) : [min(which, tables.count - 1)]
            for index in checked
            where tables[index].count != models[index].count || tables[index].map(\.id) != models[index].map(\.id)
                || tables[index].map({ Array($0.items) }) != models[index].map({ Array($0.items) })
            {
                Issue.record("step \(step): copy \(index) differs from its array")
                return
            }
        }
        #expect(models.contains { $0.count > 128 })
    }

    /// The first chunk is held in the table itself: changed through `update`, its items stay
    /// in their storage when no other table shares it, and are copied when one does.
    @Test func theFirstChunkIsChangedInPlaceUnlessShared() {
        var table = ChunkTable([ItemList.Chunk(items: (0..<4).map { Item(id: "i\($0)") })])
        func storage(_ table: ChunkTable) -> UnsafePointer<Item>? {
            table[0].items.withUnsafeBufferPointer(\.baseAddress)
        }
        let before = storage(table)
        _ = table.update(0) { $0.changeItems { $0.remove(at: 0) } }
        #expect(storage(table) == before)
        #expect(table[0].items.map(\.id) == ["i1", "i2", "i3"])
        let shared = table
        _ = table.update(0) { $0.changeItems { $0.remove(at: 0) } }
        #expect(storage(table) != storage(shared))
        #expect(shared[0].items.map(\.id) == ["i1", "i2", "i3"])
        #expect(table[0].items.map(\.id) == ["i2", "i3"])
    }
}

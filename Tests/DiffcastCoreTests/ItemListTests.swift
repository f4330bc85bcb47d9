import DiffcastTestSupport
import Testing

@testable import DiffcastCore

@Suite struct ItemListTests {
    /// The walk of a whole `apply` visits every item once, in order, in place (the hash, the
    /// chunk and the identifier forEachPlacement gives), and calls `ahead` with the hash of the
    /// item `distance` places on in the same chunk before each body: so, in a chunk of n items,
    /// the body of the item at offset o comes after min(n, o + distance + 1) of the chunk's
    /// `ahead` calls, and the `ahead` calls are the items' hashes in order.
    @Test(arguments: [0, 1, 16, 600])
    func theHashWalkVisitsEveryItemOnceWithItsAheadCallsFirst(distance: Int) {
        var list = ItemList((0..<1500).map { Item(id: "i\($0)") })
        // Splits leave chunks of uneven sizes (and a short one at the end).
        _ = list.insert(contentsOf: (0..<700).map { Item(id: "n\($0)") }, at: 300)
        var expected: [(UInt64, ItemList.ChunkID, Identifier)] = []
        list.forEachPlacement { expected.append(($0.hashBits, $1, $0)) }
        var chunkSizes: [ItemList.ChunkID: Int] = [:]
        for (_, chunk, _) in expected { chunkSizes[chunk, default: 0] += 1 }

        var aheadHashes: [UInt64] = []
        var visited: [(UInt64, ItemList.ChunkID, Identifier)] = []
        var currentChunk: ItemList.ChunkID?
        var offset = 0
        list.forEachHashPlacement(aheadDistance: distance, ahead: { aheadHashes.append($0) }) {
            hash, chunk, identifier in
            if chunk != currentChunk {
                currentChunk = chunk
                offset = 0
            }
            // Every earlier chunk's items were each announced once; of this chunk's, those up to
            // `distance` past this one.
            let size = chunkSizes[chunk] ?? 0
            #expect(
                aheadHashes.count - visited.count == min(size, offset + distance + 1) - offset,
                "item \(visited.count)")
            visited.append((hash, chunk, identifier()))
            offset += 1
        }
        #expect(visited.count == expected.count)
        #expect(zip(visited, expected).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 && $0.2 == $1.2 })
        #expect(aheadHashes == expected.map(\.0))
    }

    /// Random inserts (large enough to split chunks, and appends), removals and data changes, checked after
    /// every step against a plain array: contents, random access, every item's chunk, and the digest.
    @Test func itBehavesLikeAnArrayAcrossSplitsAndRemovals() {
        var rng = SplitMix64(seed: 5)
        var reference = (0..<2000).map { Item(id: "i\($0)") }
        var list = ItemList(reference)
        var chunkOf: [Identifier: ItemList.ChunkID] = [:]
        list.forEachPlacement { chunkOf[$0] = $1 }
        var next = 2000
        for step in 0..<400 {
            let before = list
            switch Int.random(in: 0..<4, using: &rng) {
            case 0:
                let count = [1, 3, 200, 700].randomElement(using: &rng) ?? 1
                let items = (0..<count).map { _ in
                    next += 1
                    return Item(id: "i\(next)")
                }
                // Appends (a growing feed) a third of the time: they fill chunks rather than split.
                let atEnd = Int.random(in: 0..<3, using: &rng) == 0
                let position = atEnd ? reference.count : Int.random(in: 0...reference.count, using: &rng)
                reference.insert(contentsOf: items, at: position)
                switch list.insert(contentsOf: items, at: position) {
                case .together(let items, let chunk): for item in items { chunkOf[item.id] = chunk }
                case .listed(let placements): for (id, chunk) in placements { chunkOf[id] = chunk }
                }
            case 1 where !reference.isEmpty:
                let position = Int.random(in: 0..<reference.count, using: &rng)
                #expect(list.remove(at: position) == reference.remove(at: position))
            case 2 where !reference.isEmpty:
                let position = Int.random(in: 0..<reference.count, using: &rng)
                let data = JSONText(canonical: "\(step)")
                reference[position].data = data
                list.setData(data, at: position)
            default:
                let doomed = Set(reference.shuffled(using: &rng).prefix(50).map(\.id))
                reference.removeAll { doomed.contains($0.id) }
                list.removeAll { doomed.contains($0.id) }
            }
            #expect(list.count == reference.count, "step \(step)")
            #expect(Array(list) == reference, "step \(step)")
            for _ in 0..<20 where !reference.isEmpty {
                let position = Int.random(in: 0..<reference.count, using: &rng)
                #expect(list[position] == reference[position])
                let id = reference[position].id
                #expect(list.position(of: id, inChunk: chunkOf[id] ?? 0) == position, "step \(step): \(id)")
            }
            #expect(list.chunks.allSatisfy { !$0.items.isEmpty && $0.items.count <= ItemList.chunkCapacity })
            // The chunks shared with the version before, at each end, as a walk of every chunk finds them.
            let shared = list.sharedChunks(with: before)
            let limit = min(list.chunks.count, before.chunks.count)
            let same = { (index: Int, otherIndex: Int) in
                (list.chunks[index].id, list.chunks[index].revision)
                    == (before.chunks[otherIndex].id, before.chunks[otherIndex].revision)
            }
            let leading = (0..<limit).first { !same($0, $0) } ?? limit
            let trailing =
                (0..<(limit - leading)).first { !same(list.chunks.count - 1 - $0, before.chunks.count - 1 - $0) }
                ?? limit - leading
            #expect(shared.leading == leading && shared.trailing == trailing, "step \(step)")
            // The runs read in place cover a random range exactly, each at its position.
            let low = Int.random(in: 0...reference.count, using: &rng)
            let range = low..<Int.random(in: low...reference.count, using: &rng)
            var walked: [Item] = []
            list.forEachRun(in: range) { start, run in
                #expect(start == range.lowerBound + walked.count && !run.isEmpty, "step \(step)")
                walked.append(contentsOf: run)
            }
            #expect(walked == Array(reference[range]), "step \(step)")
            // The digest depends on the items alone, not on how the list came to hold them: kept
            // prefix digests must follow every change (refreshed now and then, as publishing does).
            #expect(list.digest == ItemList(reference).digest, "step \(step)")
            if step % 3 == 0 { list.refreshDigests() }
        }
        #expect(list.chunks.count > 5)
    }

    /// Writes on sections much larger than a chunk, so changesets cross chunk splits and the
    /// differ skips shared chunks: apply(diff) must still give the new state exactly.
    @Test func largeSectionsDiffExactlyThroughChunks() throws {
        var rng = SplitMix64(seed: 17)
        var document = Document()
        try document.apply(
            .apply(sections: [
                SectionInput(id: "big", items: (0..<5000).map { Item(id: "b\($0)") }),
                SectionInput(id: "small", items: (0..<10).map { Item(id: "s\($0)") }),
            ]))
        _ = document.takeMarks()
        var next = 0
        for step in 0..<120 {
            let base = document.snapshot
            for _ in 0..<Int.random(in: 1...6, using: &rng) {
                let ids = document.snapshot.sections.flatMap { $0.items.map(\.id) }
                guard let target = ids.randomElement(using: &rng), let anchor = ids.randomElement(using: &rng) else {
                    break
                }
                let operation: WriteOperation
                switch Int.random(in: 0..<5, using: &rng) {
                case 0:
                    let count = [1, 2, 300].randomElement(using: &rng) ?? 1
                    let items = (0..<count).map { _ in
                        next += 1
                        return Item(id: "n\(next)")
                    }
                    operation = .insertItems(items, anchor: Bool.random(using: &rng) ? .before(anchor) : .after(anchor))
                case 1:
                    operation = .moveItem(target, anchor: Bool.random(using: &rng) ? .before(anchor) : .after(anchor))
                case 2:
                    operation = .deleteItems(
                        Array(Set(ids.shuffled(using: &rng).prefix(Int.random(in: 1...30, using: &rng)))))
                case 3: operation = .updateItems([DataUpdate(id: target, data: JSONText(canonical: "\(step)"))])
                default: operation = .reloadItems([target])
                }
                try? document.apply(operation)
            }
            let changes = document.changeset(since: base)
            do {
                try checkStrictly(changes, from: plain(base), to: plain(document.snapshot))
            } catch {
                Issue.record("step \(step): \(error)")
            }
            let outline = document.snapshot.outline
            for _ in 0..<10 {
                let section = Int.random(in: 0..<outline.count, using: &rng)
                guard let item = outline[section].items.indices.randomElement(using: &rng) else { continue }
                #expect(document.location(of: outline[section].items[item].id)! == (section, item))
            }
        }
    }
}

import DiffcastTestSupport
import Testing

@testable import DiffcastCore

@Suite struct ItemBufferTests {
    /// Debug builds, which the tests run, check the bounds of pinned items: a read past them
    /// stops the process instead of reading another chunk's memory.
    @Test func aPinnedReadPastTheItemsStopsADebugBuild() async {
        await #expect(processExitsWith: .failure) {
            let buffer = ItemBuffer((0..<3).map { Item(id: "s\($0)") })
            _ = buffer.pinned.items(1..<4)
        }
        await #expect(processExitsWith: .failure) {
            let buffer = ItemBuffer((0..<3).map { Item(id: "s\($0)") })
            _ = buffer.pinned.identifier(at: 3, equals: "s3")
        }
    }

    @Test func pinnedItemsAreTheBuffersInPlace() {
        let buffer = ItemBuffer((0..<4).map { Item(id: "s\($0)", data: JSONText(canonical: "\($0)")) })
        let pinned = buffer.pinned
        #expect(pinned.count == 4)
        #expect(pinned.items(1..<3).map(\.id) == ["s1", "s2"])
        #expect(pinned.identifier(at: 2, equals: "s2") && !pinned.identifier(at: 2, equals: "s1"))
        #expect(pinned.hasSameData(at: 3, as: Item(id: "s3", data: JSONText(canonical: "3"))))
        #expect(!pinned.hasSameData(at: 3, as: Item(id: "s3", data: JSONText(canonical: "4"))))
        #expect(ItemBuffer([]).pinned.count == 0)
    }

    /// The identical run, against comparing item by item: shared storage, a copy, a copy with
    /// one item changed, and offsets that end at either buffer's end.
    @Test func identicalItemsAreTheRunOfEqualItems() {
        let items = (0..<6).map { Item(id: "s\($0)", data: JSONText(canonical: "\($0)")) }
        let buffer = ItemBuffer(items)
        var changed = buffer
        changed[3] = Item(id: "s3", data: JSONText(canonical: "changed"))
        let copy = ItemBuffer(items)
        #expect(buffer.identicalItems(from: 0, as: buffer, from: 0) == 6)
        #expect(buffer.identicalItems(from: 0, as: copy, from: 0) == 6)
        #expect(buffer.identicalItems(from: 0, as: changed, from: 0) == 3)
        #expect(buffer.identicalItems(from: 4, as: changed, from: 4) == 2)
        #expect(buffer.identicalItems(from: 1, as: copy, from: 0) == 0)
        #expect(buffer.identicalItems(from: 6, as: copy, from: 0) == 0)
        #expect(buffer.identicalItems(from: 2, as: copy, from: 2) == 4)
    }

    /// Values copied from one another (as versions of a chunk are) and then changed in every
    /// way a chunk is changed, in random order: each must hold exactly what a plain array given
    /// the same operations holds, whatever the others did to the storage they share.
    @Test(arguments: [1, 2, 3] as [UInt64])
    func everyCopyStaysAnArrayOfItsOwn(seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        var buffers = [ItemBuffer((0..<3).map { Item(id: "s\($0)") })]
        var models = [(0..<3).map { Item(id: "s\($0)") }]
        var next = 0
        func freshItems(_ count: Int) -> [Item] {
            (0..<count).map { _ in
                next += 1
                return Item(id: "i\(next)", data: JSONText(canonical: "\(next)"))
            }
        }
        for step in 0..<3000 {
            let which = Int.random(in: 0..<buffers.count, using: &rng)
            switch Int.random(in: 0..<7, using: &rng) {
            case 0 where buffers.count < 12:
                // A new version: a copy that shares the storage.
                buffers.append(buffers[which])
                models.append(models[which])
            case 1, 2:
                let items = freshItems(Int.random(in: 1...5, using: &rng))
                buffers[which].append(contentsOf: items)
                models[which].append(contentsOf: items)
            case 3:
                let items = freshItems(Int.random(in: 1...3, using: &rng))
                let position = Int.random(in: 0...models[which].count, using: &rng)
                buffers[which].insert(contentsOf: items, at: position)
                models[which].insert(contentsOf: items, at: position)
            case 4 where !models[which].isEmpty:
                let position = Int.random(in: 0..<models[which].count, using: &rng)
                #expect(buffers[which].remove(at: position) == models[which].remove(at: position))
            case 5 where !models[which].isEmpty:
                let position = Int.random(in: 0..<models[which].count, using: &rng)
                let item = freshItems(1)[0]
                buffers[which][position] = item
                models[which][position] = item
            case 6 where buffers.count > 1:
                // A version forgotten (or rolled back to the one before).
                buffers.remove(at: which)
                models.remove(at: which)
            default:
                let doomed = Set(models[which].shuffled(using: &rng).prefix(2).map(\.id))
                buffers[which].removeAll { doomed.contains($0.id) }
                models[which].removeAll { doomed.contains($0.id) }
            }
            // The copy just changed is compared at every step, every copy at every 20th: a write
            // that damaged storage another copy shares leaves that copy wrong until it is checked.
            let checked = step % 20 == 19 ? Array(buffers.indices) : [min(which, buffers.count - 1)]
            for index in checked
            where Array(buffers[index]) != models[index]
                || buffers[index].withUnsafeBufferPointer({ Array($0) }) != models[index]
            {
                let (buffer, model) = (buffers[index], models[index])
                // The first difference is enough; the rest would only repeat it.
                Issue.record("step \(step): copy \(index) holds \(buffer.map(\.id)), expected \(model.map(\.id))")
                return
            }
        }
    }
}

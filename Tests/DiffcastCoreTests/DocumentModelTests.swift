import DiffcastCore
import DiffcastTestSupport
import Testing

/// Random writes on documents of up to 40 items, each checked against a plain model of the
/// writes written here from SPEC.md: whether it is refused, the state after it, where every
/// identifier is, and how many items there are. Documents grow past and shrink below the size
/// at which a document starts keeping an item directory, inside batches and transactions that
/// roll back across it.
@Suite struct DocumentModelTests {
    @Test(arguments: 0..<4)
    func randomWritesAgreeWithAPlainModel(seedBlock: Int) {
        var rng = SplitMix64(seed: UInt64(seedBlock) &* 104_729 &+ 3)
        var document = Document()
        var model = PlainDocument()
        var transactionStart: PlainDocument?
        var refused = 0
        var largest = 0
        let pool: [Identifier] = (0..<40).map { Identifier("i\($0)") } + ["ghost"]
        for step in 0..<3000 {
            switch Int.random(in: 0..<40, using: &rng) {
            case 0 where transactionStart == nil:
                document.beginTransaction()
                transactionStart = model
            case 1 where transactionStart != nil:
                document.rollBackTransaction()
                model = transactionStart ?? model
                transactionStart = nil
            case 2 where transactionStart != nil:
                document.commitTransaction()
                transactionStart = nil
            default:
                let operation = randomWrite(document, using: &rng)
                let expected = model.applying(operation)
                let accepted = (try? document.apply(operation)) != nil
                #expect(accepted == (expected != nil), "step \(step): \(operation)")
                if let expected { model = expected } else { refused += 1 }
            }
            #expect(document.snapshot.outline == model.sections, "step \(step)")
            #expect(document.itemCount == model.sections.reduce(0) { $0 + $1.items.count }, "step \(step)")
            for id in pool {
                let place = document.location(of: id)
                #expect(place?.section == model.location(of: id)?.section, "step \(step): \(id)")
                #expect(place?.item == model.location(of: id)?.item, "step \(step): \(id)")
            }
            largest = max(largest, document.itemCount)
            _ = document.takeMarks()
        }
        // The walk must cross the directory's threshold and refuse writes, or it proves little.
        #expect(largest > 20 && refused > 300)
    }
}

/// The state of a collection as plain arrays, and what each write does to it: the reference the
/// document is checked against.
private struct PlainDocument {
    var sections: [SectionOutline] = []

    func location(of id: Identifier) -> (section: Int, item: Int)? {
        for (section, outline) in sections.enumerated() {
            if let item = outline.items.firstIndex(where: { $0.id == id }) { return (section, item) }
        }
        return nil
    }

    private func sectionIndex(_ id: Identifier) -> Int? { sections.firstIndex { $0.id == id } }

    private func areNew(_ items: [Item]) -> Bool {
        let ids = items.map(\.id)
        return Set(ids).count == ids.count && !ids.contains { location(of: $0) != nil }
    }

    private func areNew(_ inputs: [SectionInput]) -> Bool {
        let ids = inputs.map(\.id)
        return Set(ids).count == ids.count && !ids.contains { sectionIndex($0) != nil }
            && areNew(inputs.flatMap(\.items))
    }

    /// The state after `operation`, or nil when SPEC.md refuses it (the state then stays).
    func applying(_ operation: WriteOperation, inBatch: Bool = false) -> PlainDocument? {
        var next = self
        switch operation {
        case .apply(let inputs):
            guard PlainDocument().areNew(inputs) else { return nil }
            next.sections = inputs
        case .appendSections(let inputs):
            guard areNew(inputs) else { return nil }
            next.sections += inputs
        case .insertSections(let inputs, let anchor):
            guard areNew(inputs), let index = sectionIndex(anchor.identifier) else { return nil }
            next.sections.insert(contentsOf: inputs, at: anchor.isBefore ? index : index + 1)
        case .deleteSections(let ids):
            guard ids.allSatisfy({ sectionIndex($0) != nil }) else { return nil }
            next.sections.removeAll { ids.contains($0.id) }
        case .moveSection(let id, let anchor):
            guard let source = sectionIndex(id), sectionIndex(anchor.identifier) != nil, id != anchor.identifier
            else { return nil }
            let section = next.sections.remove(at: source)
            let index = next.sectionIndex(anchor.identifier) ?? 0
            next.sections.insert(section, at: anchor.isBefore ? index : index + 1)
        case .reloadSections(let ids):
            guard ids.allSatisfy({ sectionIndex($0) != nil }) else { return nil }
        case .updateSections(let updates):
            for update in updates {
                guard let index = sectionIndex(update.id) else { return nil }
                next.sections[index].data = update.data
            }
        case .appendItems(let items, let sectionID):
            let index = sectionID.map { sectionIndex($0) } ?? (sections.isEmpty ? nil : sections.count - 1)
            guard let index, areNew(items) else { return nil }
            next.sections[index].items += items
        case .insertItems(let items, let anchor):
            guard let place = location(of: anchor.identifier), areNew(items) else { return nil }
            next.sections[place.section].items.insert(
                contentsOf: items, at: anchor.isBefore ? place.item : place.item + 1)
        case .deleteItems(let ids):
            guard ids.allSatisfy({ location(of: $0) != nil }) else { return nil }
            for index in next.sections.indices { next.sections[index].items.removeAll { ids.contains($0.id) } }
        case .deleteAll:
            next.sections = []
        case .moveItem(let id, let anchor):
            guard let source = location(of: id), location(of: anchor.identifier) != nil, id != anchor.identifier
            else { return nil }
            let item = next.sections[source.section].items.remove(at: source.item)
            guard let target = next.location(of: anchor.identifier) else { return nil }
            next.sections[target.section].items.insert(item, at: anchor.isBefore ? target.item : target.item + 1)
        case .reloadItems(let ids), .reconfigureItems(let ids):
            guard ids.allSatisfy({ location(of: $0) != nil }) else { return nil }
        case .updateItems(let updates):
            guard updates.allSatisfy({ location(of: $0.id) != nil }) else { return nil }
            for update in updates {
                guard let place = next.location(of: update.id) else { return nil }
                next.sections[place.section].items[place.item] = Item(id: update.id, data: update.data)
            }
        case .batch(let operations):
            guard !inBatch else { return nil }
            for operation in operations {
                guard let after = next.applying(operation, inBatch: true) else { return nil }
                next = after
            }
        }
        return next
    }
}

extension Anchor {
    fileprivate var isBefore: Bool {
        if case .before = self { return true }
        return false
    }
}

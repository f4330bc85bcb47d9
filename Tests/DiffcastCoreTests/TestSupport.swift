import DiffcastCore
import DiffcastTestSupport

func data(_ text: String?) -> JSONText? {
    text.map { JSONText(canonical: $0) }
}

/// A one-section document holding the given item identifiers.
func document(_ sections: [(String, [String])]) throws -> Document {
    var document = Document()
    try document.apply(
        .apply(
            sections: sections.map { SectionInput(id: Identifier($0.0), items: $0.1.map { Item(id: Identifier($0)) }) }
        ))
    _ = document.takeMarks()
    return document
}

func itemIDs(_ snapshot: Snapshot) -> [[String]] {
    snapshot.sections.map { $0.items.map(\.id.text) }
}

/// A random write against the document's current state: mostly valid, sometimes not.
/// `identifier` makes every identifier it names (tests of hash collisions pass their own).
func randomWrite(
    _ document: Document, using rng: inout SplitMix64, identifier: (String) -> Identifier = { Identifier($0) }
) -> WriteOperation {
    let sectionPool: [Identifier] = (0..<6).map { identifier("s\($0)") }
    let itemPool: [Identifier] = (0..<40).map { identifier("i\($0)") }
    let sections = document.snapshot.sections.map(\.id)
    let items = document.snapshot.sections.flatMap { $0.items.map(\.id) }
    let freeItems = itemPool.filter { !document.containsItem($0) }
    let freeSections = sectionPool.filter { document.snapshot.position(ofSection: $0) == nil }
    func pick(_ pool: [Identifier], _ fallback: String) -> Identifier {
        pool.randomElement(using: &rng) ?? identifier(fallback)
    }
    func someData() -> JSONText? {
        [nil, "1", "2", "\"t\"", "{\"k\":1}"].randomElement(using: &rng).flatMap { data($0) }
    }
    func anchor(_ pool: [Identifier]) -> Anchor {
        Bool.random(using: &rng) ? .before(pick(pool, "ghost")) : .after(pick(pool, "ghost"))
    }
    switch Int.random(in: 0..<16, using: &rng) {
    case 0:
        var inputs = sectionPool.shuffled(using: &rng).prefix(Int.random(in: 0...4, using: &rng)).map {
            SectionInput(id: $0, data: someData())
        }
        for item in itemPool.shuffled(using: &rng).prefix(Int.random(in: 0...30, using: &rng)) where !inputs.isEmpty {
            inputs[Int.random(in: 0..<inputs.count, using: &rng)].items.append(Item(id: item, data: someData()))
        }
        return .apply(sections: Array(inputs))
    case 1:
        return .appendSections([SectionInput(id: pick(freeSections, "s0"), items: [Item(id: pick(freeItems, "i0"))])])
    case 2:
        return .insertSections([SectionInput(id: pick(freeSections, "s0"), data: someData())], anchor: anchor(sections))
    case 3: return .deleteSections([pick(sections, "nosuch")])
    case 4: return .moveSection(pick(sections, "nosuch"), anchor: anchor(sections))
    case 5: return .updateSections([DataUpdate(id: pick(sections, "nosuch"), data: someData())])
    case 6: return .reloadSections([pick(sections, "nosuch")])
    case 7:
        let section: Identifier? = Bool.random(using: &rng) ? pick(sections, "nosuch") : nil
        return .appendItems(
            freeItems.shuffled(using: &rng).prefix(3).map { Item(id: $0, data: someData()) }, section: section)
    case 8: return .insertItems([Item(id: pick(freeItems, "i0"))], anchor: anchor(items))
    case 9: return .deleteItems(Array(items.shuffled(using: &rng).prefix(3)))
    case 10: return .moveItem(pick(items, "ghost"), anchor: anchor(items))
    case 11: return .reloadItems([pick(items, "ghost")])
    case 12: return .reconfigureItems([pick(items, "ghost")])
    case 13: return .updateItems([DataUpdate(id: pick(items, "ghost"), data: someData())])
    case 14: return .deleteAll
    default:
        var scratch = document
        var operations: [WriteOperation] = []
        for _ in 0..<Int.random(in: 2...4, using: &rng) {
            var operation = randomWrite(scratch, using: &rng, identifier: identifier)
            if case .batch = operation { operation = .deleteAll }
            operations.append(operation)
            try? scratch.apply(operation)
        }
        return .batch(operations)
    }
}

extension WriteOperation {
    /// Whether the write asks for items to be listed as updated with unchanged data.
    var reconfigures: Bool {
        switch self {
        case .reconfigureItems: true
        case .batch(let operations): operations.contains { $0.reconfigures }
        default: false
        }
    }
}

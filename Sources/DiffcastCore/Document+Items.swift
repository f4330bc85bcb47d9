/// The writes to items: insert, append, delete, move and update items, checked before they change anything.
extension Document {
    /// Throws when an item is already in the collection or appears twice among `items`.
    func checkNewItems(_ items: [Item]) throws(DiffcastError) {
        // One item (a feed's append) cannot repeat itself: nothing goes into the set.
        var seen = Set<Identifier>()
        for item in items where containsItem(item.id) || (items.count > 1 && !seen.insert(item.id).inserted) {
            throw .duplicateIdentifier(kind: .item, id: item.id)
        }
    }

    /// Inserts items new to the document (checked, or just taken out by a move), each marked as
    /// restructured.
    mutating func insertItems(_ items: [Item], section sectionIndex: Int, at position: Int) {
        placeItems(items, section: sectionIndex, at: position)
        for item in items {
            marks.restructuredItems.insert(item.id)
        }
    }

    /// Appends items new to the document (checked) at the end of a section, marked by their count
    /// (`ChangeMarks.appendedTails`): a feed's append puts nothing in a set.
    mutating func appendItems(_ items: [Item], section sectionIndex: Int) {
        placeItems(items, section: sectionIndex, at: snapshot.sections[sectionIndex].items.count)
        marks.noteAppended(items.count, toSectionAt: sectionIndex)
    }

    /// Marks the items of the appended tails one by one, as restructured: done before any write
    /// other than an append, after which they might not be the last items of their sections.
    mutating func listAppendedTails() {
        guard !marks.appendedTails.isEmpty else { return }
        for tail in marks.appendedTails {
            let items = snapshot.sections[tail.section].items
            for item in items[(items.count - tail.count)...] { marks.restructuredItems.insert(item.id) }
        }
        marks.appendedTails = []
    }

    /// Puts items new to the document into a section and the directory.
    mutating func placeItems(_ items: [Item], section sectionIndex: Int, at position: Int) {
        let sectionID = snapshot.sections[sectionIndex].id
        let revision = nextRevision()
        let placements = snapshot.withSection(at: sectionIndex) { section in
            section.structureRevision = revision
            section.contentRevision = revision
            return section.items.insert(contentsOf: items, at: position)
        }
        switch placements {
        case .together(_, let chunk):
            for item in items { addLocation(chunk, for: item.id) }
            recordOwner(sectionID, ofChunks: CollectionOfOne(chunk))
        case .listed(let placements):
            // A split also reports the items it moved to another chunk, which the directory
            // already holds.
            let split = placements.count > items.count
            let inserted = split ? Set(items.map(\.id)) : []
            for (id, chunk) in placements {
                if !split || inserted.contains(id) {
                    addLocation(chunk, for: id)
                } else {
                    moveLocation(of: id, to: chunk)
                }
            }
            recordOwner(sectionID, ofChunks: placements.lazy.map(\.1))
        }
    }

    /// A few items are removed one by one where they stand; many from one section in one pass.
    mutating func deleteItems(_ ids: Set<Identifier>) {
        var idsBySection: [Int: [Identifier]] = [:]
        var positions: [Identifier: Int] = [:]
        for id in ids {
            if let (section, item) = location(of: id) {
                idsBySection[section, default: []].append(id)
                positions[id] = item
            }
        }
        for id in ids {
            removeLocation(of: id)
            marks.forgetItem(id)
            marks.restructuredItems.insert(id)
        }
        for (index, sectionIDs) in idsBySection {
            let revision = nextRevision()
            let onePass = sectionIDs.count > Self.deletionsRemovedOneByOne
            let descending = sectionIDs.compactMap { positions[$0] }.sorted(by: >)
            snapshot.withSection(at: index) { section in
                if onePass {
                    section.items.removeAll { ids.contains($0.id) }
                } else {
                    for position in descending { section.items.remove(at: position) }
                }
                section.structureRevision = revision
                section.contentRevision = revision
            }
        }
    }

    static let deletionsRemovedOneByOne = 16

    mutating func moveItem(_ id: Identifier, anchor: Anchor) throws(DiffcastError) {
        guard let source = location(of: id) else { throw .unknownItem(id) }
        guard location(of: anchor.identifier) != nil else { throw .unknownItem(anchor.identifier) }
        guard id != anchor.identifier else {
            throw .invalidArgument("item '\(id)' cannot be moved relative to itself")
        }
        let item = snapshot.sections[source.section].items[source.item]
        let revision = nextRevision()
        snapshot.withSection(at: source.section) { section in
            section.items.remove(at: source.item)
            section.structureRevision = revision
            section.contentRevision = revision
        }
        removeLocation(of: id)
        guard let target = location(of: anchor.identifier) else { return }
        insertItems([item], section: target.section, at: anchor.isBefore ? target.item : target.item + 1)
    }

    mutating func updateItems(_ updates: [DataUpdate]) throws(DiffcastError) {
        var targets: [(section: Int, item: Int)] = []
        for update in updates {
            guard let target = location(of: update.id) else { throw .unknownItem(update.id) }
            targets.append(target)
        }
        for (target, update) in zip(targets, updates) {
            let revision = nextRevision()
            snapshot.withSection(at: target.section) { section in
                section.items.setData(update.data, at: target.item)
                section.contentRevision = revision
            }
            marks.dataChangedItems.insert(update.id)
        }
    }
}

extension Anchor {
    var isBefore: Bool {
        if case .before = self { return true }
        return false
    }
}

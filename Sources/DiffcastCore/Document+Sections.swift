/// The writes to sections: replace everything, insert, delete and move sections.
extension Document {
    func sectionIndex(_ id: Identifier) throws(DiffcastError) -> Int {
        guard let index = snapshot.position(ofSection: id) else { throw .unknownSection(id) }
        return index
    }

    mutating func replaceAll(with inputs: [SectionInput]) throws(DiffcastError) {
        var sectionIDs = Set<Identifier>()
        for input in inputs where !sectionIDs.insert(input.id).inserted {
            throw .duplicateIdentifier(kind: .section, id: input.id)
        }
        let sections = inputs.map { input in
            Section(id: input.id, data: input.data, items: ItemList(input.items), revision: nextRevision())
        }
        let itemCount = inputs.reduce(0) { $0 + $1.items.count }
        var newDirectory: ItemDirectory?
        var duplicate: Identifier?
        if !Self.isSmall(sections: inputs.count, items: itemCount) {
            var table = ItemDirectory(capacity: itemCount)
            for section in sections where duplicate == nil {
                section.items.forEachHashPlacement(
                    aheadDistance: IdentifierTable.prefetchDistance, ahead: { table.prefetch(hash: $0) }
                ) { hashBits, chunk, identifier in
                    // A shared hash is a duplicate or (in practice never) two identifiers with one
                    // hash: counting says which.
                    if !table.add(hashBits: hashBits, chunk: chunk, identifier: identifier), duplicate == nil,
                        Self.occurrences(of: identifier(), in: sections, atLeast: 2)
                    {
                        duplicate = identifier()
                    }
                }
            }
            newDirectory = table
        } else {
            duplicate = Self.firstRepeatedItem(in: inputs)
        }
        if let duplicate { throw .duplicateIdentifier(kind: .item, id: duplicate) }
        undo?.directoryChanges.append(.replaced(directory))
        directory = newDirectory
        snapshot.replaceSections(sections)
        rebuildChunkOwners()
        var keptMarks = marks
        keptMarks.keepItems(where: { containsItem($0) })
        marks = keptMarks
        marks.replacedEverything = true
        marks.reloadedSections = marks.reloadedSections.filter { sectionIDs.contains($0) }
    }

    mutating func insertSections(_ inputs: [SectionInput], at position: Int) throws(DiffcastError) {
        var sectionIDs = Set<Identifier>()
        for input in inputs
        where snapshot.position(ofSection: input.id) != nil || !sectionIDs.insert(input.id).inserted {
            throw .duplicateIdentifier(kind: .section, id: input.id)
        }
        try checkNewItems(inputs.flatMap(\.items))
        var sections: [Section] = []
        for input in inputs {
            let section = Section(
                id: input.id, data: input.data, items: ItemList(input.items), revision: nextRevision())
            section.items.forEachPlacement { id, chunk in
                addLocation(chunk, for: id)
                marks.restructuredItems.insert(id)
            }
            sections.append(section)
        }
        snapshot.insertSections(sections, at: position)
        for section in sections {
            var chunks: [ItemList.ChunkID] = []
            section.items.forEachChunk { chunks.append($0) }
            recordOwner(section.id, ofChunks: chunks)
        }
    }

    mutating func deleteSections(_ ids: [Identifier]) throws(DiffcastError) {
        var indices = Set<Int>()
        for id in ids { indices.insert(try sectionIndex(id)) }
        for index in indices {
            let section = snapshot.sections[index]
            for item in section.items {
                removeLocation(of: item.id)
                marks.forgetItem(item.id)
                marks.restructuredItems.insert(item.id)
            }
            marks.reloadedSections.remove(section.id)
        }
        snapshot.removeSections(at: Array(indices))
        if snapshot.sections.count <= 1 { chunkOwners = [:] }
    }

    mutating func moveSection(_ id: Identifier, anchor: Anchor) throws(DiffcastError) {
        let source = try sectionIndex(id)
        _ = try sectionIndex(anchor.identifier)
        guard id != anchor.identifier else {
            throw .invalidArgument("section '\(id)' cannot be moved relative to itself")
        }
        let section = snapshot.sections[source]
        snapshot.removeSections(at: [source])
        let anchorIndex = snapshot.position(ofSection: anchor.identifier) ?? 0
        snapshot.insertSections([section], at: anchor.isBefore ? anchorIndex : anchorIndex + 1)
    }
}

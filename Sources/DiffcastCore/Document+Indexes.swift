/// The indexes that find an item without a scan (the directory and the chunk owners), kept in
/// step with every write and put back by a rollback.
extension Document {
    func nextRevision() -> Revision {
        Revision.next()
    }

    /// Enters an item new to the directory.
    mutating func addLocation(_ chunk: ItemList.ChunkID, for id: Identifier) {
        guard directory != nil else { return }
        undo?.directoryChanges.append(.added(id))
        directory?.add(id, chunk: chunk)
    }

    /// Records the new chunk of an item in the directory.
    mutating func moveLocation(of id: Identifier, to chunk: ItemList.ChunkID) {
        if undo != nil, let previous = directory?.candidateChunk(of: id) {
            undo?.directoryChanges.append(.moved(id, from: previous))
        }
        directory?.move(id, to: chunk)
    }

    /// Takes an item in the directory out of it.
    mutating func removeLocation(of id: Identifier) {
        if undo != nil, let previous = directory?.candidateChunk(of: id) {
            undo?.directoryChanges.append(.removed(id, previous))
        }
        directory?.remove(id)
    }

    /// Builds the directory of a document without one that is no longer small. Once built it
    /// stays, however small the document gets, until an `apply` replaces it all.
    mutating func indexIfLarge() {
        guard directory == nil, !Self.isSmall(sections: snapshot.sections.count, items: snapshot.itemCount)
        else { return }
        var table = ItemDirectory(capacity: snapshot.itemCount)
        for section in snapshot.sections {
            section.items.forEachHashPlacement(
                aheadDistance: IdentifierTable.prefetchDistance, ahead: { table.prefetch(hash: $0) }
            ) { hashBits, chunk, identifier in
                table.add(hashBits: hashBits, chunk: chunk, identifier: identifier)
            }
        }
        undo?.directoryChanges.append(.replaced(nil))
        directory = table
    }

    /// Notes that `section` holds `chunks` (nothing to note with one section or none), and
    /// rebuilds the table when it was empty or lingering entries doubled it.
    mutating func recordOwner(_ section: Identifier, ofChunks chunks: some Sequence<ItemList.ChunkID>) {
        guard snapshot.sections.count > 1 else { return }
        if chunkOwners.isEmpty || chunkOwners.count >= chunkOwnersLimit { return rebuildChunkOwners() }
        for chunk in chunks { chunkOwners[chunk] = section }
    }

    /// The section of every chunk, afresh from the snapshot (empty with one section or none).
    mutating func rebuildChunkOwners() {
        chunkOwners = [:]
        if snapshot.sections.count > 1 {
            for section in snapshot.sections {
                section.items.forEachChunk { chunkOwners[$0] = section.id }
            }
        }
        chunkOwnersLimit = 2 * chunkOwners.count + 64
    }

    /// The first item identifier that `inputs` name a second time, found by comparing each item
    /// with those before it: for a few items, which get no directory to find it.
    static func firstRepeatedItem(in inputs: [SectionInput]) -> Identifier? {
        for (sectionIndex, input) in inputs.enumerated() {
            for (itemIndex, item) in input.items.enumerated() {
                if input.items[..<itemIndex].contains(where: { $0.id == item.id })
                    || inputs[..<sectionIndex].contains(where: { $0.items.contains { $0.id == item.id } })
                {
                    return item.id
                }
            }
        }
        return nil
    }

    /// Whether `id` is among the items of `sections` at least `count` times.
    static func occurrences(of id: Identifier, in sections: [Section], atLeast count: Int) -> Bool {
        var found = 0
        for section in sections {
            for item in section.items where item.id == id {
                found += 1
                if found >= count { return true }
            }
        }
        return false
    }
}

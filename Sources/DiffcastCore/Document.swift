/// The mutable state of one collection, as the apply queue holds it: the current `Snapshot`
/// plus the indexes that make every write cost what it touches rather than the collection size.
///
/// Every write either takes effect whole or throws and leaves the document as it was. Marks
/// (reloads, reconfigures, data updates) collect until `takeMarks()` hands them to the differ.
public struct Document: Sendable {
    public internal(set) var snapshot: Snapshot
    /// The chunk of every item, once the document holds more than `scannedItems` or more than
    /// `scannedSections`. A small document finds an item by a scan of its snapshot, a few steps
    /// (as `Snapshot` finds one of a few sections), so a small collection holds no table and none
    /// of the memory a table takes.
    @usableFromInline var directory: ItemDirectory?
    static let scannedItems = 8
    static let scannedSections = 8

    /// Whether a document of these sections and items is small enough to go without a directory.
    static func isSmall(sections: Int, items: Int) -> Bool {
        sections <= scannedSections && items <= scannedItems
    }
    /// The section of every chunk, when there is more than one section (with one, it holds
    /// every chunk). Entries of chunks that are gone may linger until the next rebuild.
    var chunkOwners: [ItemList.ChunkID: Identifier] = [:]
    /// How many entries `chunkOwners` may reach before it is rebuilt without the lingering ones.
    var chunkOwnersLimit = 0
    var marks = ChangeMarks()
    /// Open while a batch or a transaction runs: how to put the directory back.
    var undo: UndoLog?
    /// Where the open transaction started.
    var transactionStart: UndoPoint?

    public init() {
        snapshot = Snapshot()
    }

    /// A document holding `snapshot`, whose identifiers must be unique (a restored state).
    public init(restoring outline: [SectionOutline]) throws(DiffcastError) {
        self.init()
        try apply(.apply(sections: outline))
        _ = takeMarks()
    }

    /// Inlinable, so that a caller holding the document in a class reads two fields instead of
    /// copying the whole value (it is checked before every write).
    @inlinable public var itemCount: Int { directory?.count ?? snapshot.itemCount }

    public func containsItem(_ id: Identifier) -> Bool { location(of: id) != nil }

    /// The position of an item in the current snapshot, or nil when there is no such item: a
    /// scan of its section's chunk table and of one chunk, never of the whole section (in a
    /// small document, without a directory, a scan of its few items).
    public func location(of id: Identifier) -> (section: Int, item: Int)? {
        // Not bound to a name: a copy of the directory would count its tables up and down.
        guard directory != nil else { return scanForLocation(of: id) }
        guard let chunk = directory?.candidateChunk(of: id), let sectionIndex = section(holding: chunk),
            let itemIndex = snapshot.sections[sectionIndex].items.position(of: id, inChunk: chunk)
        else { return nil }
        return (sectionIndex, itemIndex)
    }

    /// The position of an item in a document without a directory, found by looking at every item.
    func scanForLocation(of id: Identifier) -> (section: Int, item: Int)? {
        for (sectionIndex, section) in snapshot.sections.enumerated() {
            if let itemIndex = section.items.firstIndex(where: { $0.id == id }) { return (sectionIndex, itemIndex) }
        }
        return nil
    }

    /// The position of the section that holds `chunk` (or, with one section, of that section).
    func section(holding chunk: ItemList.ChunkID) -> Int? {
        if snapshot.sections.count == 1 { return 0 }
        guard let owner = chunkOwners[chunk] else { return nil }
        return snapshot.position(ofSection: owner)
    }

    /// Folds the digests of the chunks the writes changed (see `Snapshot.refreshDigests()`).
    public mutating func refreshDigests() {
        snapshot.refreshDigests()
    }

    /// Hands over what the writes since the last call asked to be listed, and starts afresh.
    public mutating func takeMarks() -> ChangeMarks {
        defer { marks = ChangeMarks() }
        return marks
    }

    // MARK: - Applying writes

    /// Applies one write. On error nothing changes.
    ///
    /// - Complexity: O(items written) for lookups in the `ItemDirectory`, plus the copy of each
    ///   chunk the write touches that an earlier version still shares (at most 512 items).
    public mutating func apply(_ operation: WriteOperation) throws(DiffcastError) {
        switch operation {
        case .batch(let operations):
            try applyBatch(operations)
        default:
            try applySingle(operation)
        }
    }

    /// Starts remembering how to undo the writes from here on, for writes that are applied
    /// but may still be refused as a whole (the daemon's batch whose log record cannot be
    /// written). It costs what the writes touch: the directory's changes are logged, the
    /// snapshot is shared, never copied. Does nothing when a transaction is already open.
    public mutating func beginTransaction() {
        guard transactionStart == nil else { return }
        if undo == nil { undo = UndoLog() }
        transactionStart = undoPoint()
    }

    /// Keeps every write since `beginTransaction()` and forgets how to undo them.
    public mutating func commitTransaction() {
        transactionStart = nil
        undo = nil
    }

    /// Undoes every write since `beginTransaction()`, as if none had happened.
    public mutating func rollBackTransaction() {
        guard let start = transactionStart else { return }
        rollBack(to: start)
        commitTransaction()
    }

    mutating func applyBatch(_ operations: [WriteOperation]) throws(DiffcastError) {
        let opensLog = undo == nil
        if opensLog { undo = UndoLog() }
        let start = undoPoint()
        defer { if opensLog { undo = nil } }
        do throws(DiffcastError) {
            for (entry, operation) in operations.enumerated() {
                do throws(DiffcastError) {
                    if case .batch = operation {
                        throw .invalidArgument("a batch cannot contain a batch")
                    }
                    try applySingle(operation)
                } catch {
                    throw .inBatch(entry: entry, error)
                }
            }
        } catch {
            rollBack(to: start)
            throw error
        }
    }

    func undoPoint() -> UndoPoint {
        UndoPoint(snapshot: snapshot, marks: marks, directoryChanges: undo?.directoryChanges.count ?? 0)
    }

    /// Puts the document back as it was at `point`: the directory changes since then undone
    /// newest first, the snapshot and marks as they were.
    mutating func rollBack(to point: UndoPoint) {
        while let count = undo?.directoryChanges.count, count > point.directoryChanges,
            let change = undo?.directoryChanges.removeLast()
        {
            switch change {
            case .added(let id): directory?.remove(id)
            case .moved(let id, let chunk): directory?.move(id, to: chunk)
            case .removed(let id, let chunk): directory?.add(id, chunk: chunk)
            case .replaced(let previous): directory = previous
            }
        }
        snapshot = point.snapshot
        marks = point.marks
        rebuildChunkOwners()
    }

    /// Applies one write that is not a batch, then gives the document its directory if the
    /// write made it large.
    mutating func applySingle(_ operation: WriteOperation) throws(DiffcastError) {
        try applyWrite(operation)
        indexIfLarge()
    }

    mutating func applyWrite(_ operation: WriteOperation) throws(DiffcastError) {
        if case .appendItems = operation {} else { listAppendedTails() }
        switch operation {
        case .apply(let sections):
            try replaceAll(with: sections)
        case .appendSections(let sections):
            try insertSections(sections, at: snapshot.sections.count)
        case .insertSections(let sections, let anchor):
            let anchorIndex = try sectionIndex(anchor.identifier)
            try insertSections(sections, at: anchor.isBefore ? anchorIndex : anchorIndex + 1)
        case .deleteSections(let ids):
            try deleteSections(ids)
        case .moveSection(let id, let anchor):
            try moveSection(id, anchor: anchor)
        case .reloadSections(let ids):
            for id in ids { _ = try sectionIndex(id) }
            marks.reloadedSections.formUnion(ids)
        case .updateSections(let updates):
            var indices: [Int] = []
            for update in updates { indices.append(try sectionIndex(update.id)) }
            for (index, update) in zip(indices, updates) {
                snapshot.withSection(at: index) { $0.data = update.data }
            }
        case .appendItems(let items, let sectionID):
            let index: Int
            if let sectionID {
                index = try sectionIndex(sectionID)
            } else if snapshot.sections.isEmpty {
                throw .noSection
            } else {
                index = snapshot.sections.count - 1
            }
            try checkNewItems(items)
            appendItems(items, section: index)
        case .insertItems(let items, let anchor):
            guard let (section, item) = location(of: anchor.identifier) else {
                throw .unknownItem(anchor.identifier)
            }
            try checkNewItems(items)
            insertItems(items, section: section, at: anchor.isBefore ? item : item + 1)
        case .deleteItems(let ids):
            for id in ids where !containsItem(id) { throw .unknownItem(id) }
            deleteItems(Set(ids))
        case .deleteAll:
            try replaceAll(with: [])
        case .moveItem(let id, let anchor):
            try moveItem(id, anchor: anchor)
        case .reloadItems(let ids):
            for id in ids where !containsItem(id) { throw .unknownItem(id) }
            marks.reloadedItems.formUnion(ids)
        case .reconfigureItems(let ids):
            for id in ids where !containsItem(id) { throw .unknownItem(id) }
            marks.reconfiguredItems.formUnion(ids)
        case .updateItems(let updates):
            try updateItems(updates)
        case .batch:
            throw .invalidArgument("a batch cannot contain a batch")
        }
    }
}

/// The directory changes of an open batch or transaction, oldest first, each with what undoes it.
struct UndoLog: Sendable {
    enum Change: Sendable {
        case added(Identifier)
        case moved(Identifier, from: ItemList.ChunkID)
        case removed(Identifier, ItemList.ChunkID)
        case replaced(ItemDirectory?)
    }

    var directoryChanges: [Change] = []
}

/// A point to roll back to: the snapshot and marks then (shared, not copied) and how many
/// directory changes the log held. A class, so that a document (and every idle collection)
/// holds one pointer for it rather than 80 bytes it uses only while a transaction is open.
final class UndoPoint: Sendable {
    let snapshot: Snapshot
    let marks: ChangeMarks
    let directoryChanges: Int

    init(snapshot: Snapshot, marks: ChangeMarks, directoryChanges: Int) {
        self.snapshot = snapshot
        self.marks = marks
        self.directoryChanges = directoryChanges
    }
}

extension Document {
    /// The changeset from `base` (an earlier snapshot of this document) to now, carrying and
    /// clearing the marks the writes since then left.
    public mutating func changeset(since base: Snapshot) -> Changeset {
        refreshDigests()
        let marks = takeMarks()
        var newLocations: [Identifier: ItemPath] = [:]
        for id in marks.dataChangedItems.union(marks.reloadedItems).union(marks.reconfiguredItems) {
            if let (section, item) = location(of: id) {
                newLocations[id] = ItemPath(section, item)
            }
        }
        return Differ.changeset(from: base, to: snapshot, hints: .init(marks: marks, newLocations: newLocations))
    }
}

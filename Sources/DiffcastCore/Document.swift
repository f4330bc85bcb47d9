/// The mutable state of one collection, as the apply queue holds it: the current `Snapshot`
/// plus the indexes that make every write cost what it touches rather than the collection size.
///
/// Every write either takes effect whole or throws and leaves the document as it was. Marks
/// (reloads, reconfigures, data updates) collect until `takeMarks()` hands them to the differ.
public struct Document: Sendable {
    public private(set) var snapshot: Snapshot
    /// The chunk of every item, once the document holds more than `scannedItems` or more than
    /// `scannedSections`. A small document finds an item by a scan of its snapshot, a few steps
    /// (as `Snapshot` finds one of a few sections), so a small collection holds no table and none
    /// of the memory a table takes.
    @usableFromInline var directory: ItemDirectory?
    private static let scannedItems = 8
    private static let scannedSections = 8

    /// Whether a document of these sections and items is small enough to go without a directory.
    private static func isSmall(sections: Int, items: Int) -> Bool {
        sections <= scannedSections && items <= scannedItems
    }
    /// The section of every chunk, when there is more than one section (with one, it holds
    /// every chunk). Entries of chunks that are gone may linger until the next rebuild.
    private var chunkOwners: [ItemList.ChunkID: Identifier] = [:]
    /// How many entries `chunkOwners` may reach before it is rebuilt without the lingering ones.
    private var chunkOwnersLimit = 0
    private var marks = ChangeMarks()
    /// Open while a batch or a transaction runs: how to put the directory back.
    private var undo: UndoLog?
    /// Where the open transaction started.
    private var transactionStart: UndoPoint?

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
        guard let directory else { return scanForLocation(of: id) }
        guard let chunk = directory.candidateChunk(of: id), let sectionIndex = section(holding: chunk),
            let itemIndex = snapshot.sections[sectionIndex].items.position(of: id, inChunk: chunk)
        else { return nil }
        return (sectionIndex, itemIndex)
    }

    /// The position of an item in a document without a directory, found by looking at every item.
    private func scanForLocation(of id: Identifier) -> (section: Int, item: Int)? {
        for (sectionIndex, section) in snapshot.sections.enumerated() {
            if let itemIndex = section.items.firstIndex(where: { $0.id == id }) { return (sectionIndex, itemIndex) }
        }
        return nil
    }

    /// The position of the section that holds `chunk` (or, with one section, of that section).
    private func section(holding chunk: ItemList.ChunkID) -> Int? {
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

    private mutating func applyBatch(_ operations: [WriteOperation]) throws(DiffcastError) {
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

    private func undoPoint() -> UndoPoint {
        UndoPoint(snapshot: snapshot, marks: marks, directoryChanges: undo?.directoryChanges.count ?? 0)
    }

    /// Puts the document back as it was at `point`: the directory changes since then undone
    /// newest first, the snapshot and marks as they were.
    private mutating func rollBack(to point: UndoPoint) {
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
    private mutating func applySingle(_ operation: WriteOperation) throws(DiffcastError) {
        try applyWrite(operation)
        indexIfLarge()
    }

    private mutating func applyWrite(_ operation: WriteOperation) throws(DiffcastError) {
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

    // MARK: - Sections

    private func sectionIndex(_ id: Identifier) throws(DiffcastError) -> Int {
        guard let index = snapshot.position(ofSection: id) else { throw .unknownSection(id) }
        return index
    }

    private mutating func replaceAll(with inputs: [SectionInput]) throws(DiffcastError) {
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
                var ahead = ItemList.Cursor(section.items, at: IdentifierTable.prefetchDistance)
                section.items.forEachPlacement { id, chunk in
                    if !ahead.atEnd {
                        table.prefetch(hash: ahead.hashBits)
                        ahead.advance()
                    }
                    // A shared hash is a duplicate or (in practice never) two identifiers with one
                    // hash: counting says which.
                    if !table.add(id, chunk: chunk), duplicate == nil,
                        Self.occurrences(of: id, in: sections, atLeast: 2)
                    {
                        duplicate = id
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

    private mutating func insertSections(_ inputs: [SectionInput], at position: Int) throws(DiffcastError) {
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

    private mutating func deleteSections(_ ids: [Identifier]) throws(DiffcastError) {
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

    private mutating func moveSection(_ id: Identifier, anchor: Anchor) throws(DiffcastError) {
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

    // MARK: - Items

    /// Throws when an item is already in the collection or appears twice among `items`.
    private func checkNewItems(_ items: [Item]) throws(DiffcastError) {
        // One item (a feed's append) cannot repeat itself: nothing goes into the set.
        var seen = Set<Identifier>()
        for item in items where containsItem(item.id) || (items.count > 1 && !seen.insert(item.id).inserted) {
            throw .duplicateIdentifier(kind: .item, id: item.id)
        }
    }

    /// Inserts items new to the document (checked, or just taken out by a move), each marked as
    /// restructured.
    private mutating func insertItems(_ items: [Item], section sectionIndex: Int, at position: Int) {
        placeItems(items, section: sectionIndex, at: position)
        for item in items {
            marks.restructuredItems.insert(item.id)
        }
    }

    /// Appends items new to the document (checked) at the end of a section, marked by their count
    /// (`ChangeMarks.appendedTails`): a feed's append puts nothing in a set.
    private mutating func appendItems(_ items: [Item], section sectionIndex: Int) {
        placeItems(items, section: sectionIndex, at: snapshot.sections[sectionIndex].items.count)
        marks.noteAppended(items.count, toSectionAt: sectionIndex)
    }

    /// Marks the items of the appended tails one by one, as restructured: done before any write
    /// other than an append, after which they might not be the last items of their sections.
    private mutating func listAppendedTails() {
        guard !marks.appendedTails.isEmpty else { return }
        for tail in marks.appendedTails {
            let items = snapshot.sections[tail.section].items
            for item in items[(items.count - tail.count)...] { marks.restructuredItems.insert(item.id) }
        }
        marks.appendedTails = []
    }

    /// Puts items new to the document into a section and the directory.
    private mutating func placeItems(_ items: [Item], section sectionIndex: Int, at position: Int) {
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
    private mutating func deleteItems(_ ids: Set<Identifier>) {
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

    private static let deletionsRemovedOneByOne = 16

    private mutating func moveItem(_ id: Identifier, anchor: Anchor) throws(DiffcastError) {
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

    private mutating func updateItems(_ updates: [DataUpdate]) throws(DiffcastError) {
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

    // MARK: - Indexes

    private func nextRevision() -> Revision {
        Revision.next()
    }

    /// Enters an item new to the directory.
    private mutating func addLocation(_ chunk: ItemList.ChunkID, for id: Identifier) {
        guard directory != nil else { return }
        undo?.directoryChanges.append(.added(id))
        directory?.add(id, chunk: chunk)
    }

    /// Records the new chunk of an item in the directory.
    private mutating func moveLocation(of id: Identifier, to chunk: ItemList.ChunkID) {
        if undo != nil, let previous = directory?.candidateChunk(of: id) {
            undo?.directoryChanges.append(.moved(id, from: previous))
        }
        directory?.move(id, to: chunk)
    }

    /// Takes an item in the directory out of it.
    private mutating func removeLocation(of id: Identifier) {
        if undo != nil, let previous = directory?.candidateChunk(of: id) {
            undo?.directoryChanges.append(.removed(id, previous))
        }
        directory?.remove(id)
    }

    /// Builds the directory of a document without one that is no longer small. Once built it
    /// stays, however small the document gets, until an `apply` replaces it all.
    private mutating func indexIfLarge() {
        guard directory == nil, !Self.isSmall(sections: snapshot.sections.count, items: snapshot.itemCount)
        else { return }
        var table = ItemDirectory(capacity: snapshot.itemCount)
        for section in snapshot.sections {
            section.items.forEachPlacement { id, chunk in table.add(id, chunk: chunk) }
        }
        undo?.directoryChanges.append(.replaced(nil))
        directory = table
    }

    /// Notes that `section` holds `chunks` (nothing to note with one section or none), and
    /// rebuilds the table when it was empty or lingering entries doubled it.
    private mutating func recordOwner(_ section: Identifier, ofChunks chunks: some Sequence<ItemList.ChunkID>) {
        guard snapshot.sections.count > 1 else { return }
        if chunkOwners.isEmpty || chunkOwners.count >= chunkOwnersLimit { return rebuildChunkOwners() }
        for chunk in chunks { chunkOwners[chunk] = section }
    }

    /// The section of every chunk, afresh from the snapshot (empty with one section or none).
    private mutating func rebuildChunkOwners() {
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
    private static func firstRepeatedItem(in inputs: [SectionInput]) -> Identifier? {
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
    private static func occurrences(of id: Identifier, in sections: [Section], atLeast count: Int) -> Bool {
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

/// What the writes since the last changeset asked to be listed beyond what the diff finds.
///
/// Its fields are kept in an array of at most one element, made by the first mark: a document
/// holds marks only from a write to the next published version, so an idle collection holds 8
/// bytes for them rather than 41 (five sets and a flag). An array, not a class, so that a mark
/// is set through the array's own copy-on-write, without the dynamic exclusivity check a class
/// property pays on every access (DiffcastCore keeps those checks in release builds).
public struct ChangeMarks: Sendable, Equatable {
    public var reloadedItems: Set<Identifier> {
        get { stored.first?.reloadedItems ?? [] }
        _modify { yield &fields.reloadedItems }
    }
    public var reconfiguredItems: Set<Identifier> {
        get { stored.first?.reconfiguredItems ?? [] }
        _modify { yield &fields.reconfiguredItems }
    }
    public var reloadedSections: Set<Identifier> {
        get { stored.first?.reloadedSections ?? [] }
        _modify { yield &fields.reloadedSections }
    }
    /// Items whose data a write set: the differ checks only these in sections whose item
    /// order did not change.
    public var dataChangedItems: Set<Identifier> {
        get { stored.first?.dataChangedItems ?? [] }
        _modify { yield &fields.dataChangedItems }
    }
    /// Items a write inserted, deleted or moved, but for those in `appendedTails`. Every other
    /// item kept its relative order, which lets the differ walk changed sections without
    /// hashing them.
    public var restructuredItems: Set<Identifier> {
        get { stored.first?.restructuredItems ?? [] }
        _modify { yield &fields.restructuredItems }
    }
    /// A write replaced the whole collection (`apply`, `delete_all`): only a full diff says what changed.
    public var replacedEverything: Bool {
        get { stored.first?.replacedEverything ?? false }
        _modify { yield &fields.replacedEverything }
    }
    /// Items appended at the ends of sections, told by count rather than one by one in
    /// `restructuredItems`: for a section (by position), how many of its last items are appends
    /// new to the collection. Appends only follow one another here; any other write first
    /// moves these items into `restructuredItems`. A growing feed so marks no item in a set,
    /// and the differ finds its new items by their position.
    public var appendedTails: [AppendedTail] {
        get { stored.first?.appendedTails ?? [] }
        _modify { yield &fields.appendedTails }
    }

    /// The last `count` items of the section at position `section` were appended.
    public struct AppendedTail: Sendable, Equatable {
        public var section: Int
        public var count: Int
    }

    /// How many of the last items of the section at `section` were appended.
    public func appendedCount(ofSectionAt section: Int) -> Int {
        guard let tails = stored.first?.appendedTails else { return 0 }
        return tails.first { $0.section == section }?.count ?? 0
    }

    mutating func noteAppended(_ count: Int, toSectionAt section: Int) {
        fields.noteAppended(count, toSectionAt: section)
    }

    private struct Fields: Sendable, Equatable {
        var reloadedItems = Set<Identifier>()
        var reconfiguredItems = Set<Identifier>()
        var reloadedSections = Set<Identifier>()
        var dataChangedItems = Set<Identifier>()
        var restructuredItems = Set<Identifier>()
        var replacedEverything = false
        var appendedTails: [AppendedTail] = []

        mutating func noteAppended(_ count: Int, toSectionAt section: Int) {
            if let index = appendedTails.firstIndex(where: { $0.section == section }) {
                appendedTails[index].count += count
            } else {
                appendedTails.append(AppendedTail(section: section, count: count))
            }
        }
    }

    /// Empty until the first mark, then one element.
    private var stored: [Fields] = []

    public init() {}

    /// The fields, made when there are none yet.
    private var fields: Fields {
        get { stored.first ?? Fields() }
        _modify {
            if stored.isEmpty { stored.append(Fields()) }
            yield &stored[0]
        }
    }

    public static func == (lhs: ChangeMarks, rhs: ChangeMarks) -> Bool {
        (lhs.stored.first ?? Fields()) == (rhs.stored.first ?? Fields())
    }

    mutating func forgetItem(_ id: Identifier) {
        reloadedItems.remove(id)
        reconfiguredItems.remove(id)
        dataChangedItems.remove(id)
    }

    mutating func keepItems(where isAlive: (Identifier) -> Bool) {
        reloadedItems = reloadedItems.filter(isAlive)
        reconfiguredItems = reconfiguredItems.filter(isAlive)
        dataChangedItems = dataChangedItems.filter(isAlive)
    }
}

/// The directory changes of an open batch or transaction, oldest first, each with what undoes it.
private struct UndoLog: Sendable {
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
private final class UndoPoint: Sendable {
    let snapshot: Snapshot
    let marks: ChangeMarks
    let directoryChanges: Int

    init(snapshot: Snapshot, marks: ChangeMarks, directoryChanges: Int) {
        self.snapshot = snapshot
        self.marks = marks
        self.directoryChanges = directoryChanges
    }
}

extension Anchor {
    var isBefore: Bool {
        if case .before = self { return true }
        return false
    }
}

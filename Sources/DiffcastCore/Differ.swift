/// Computes the changeset between two snapshots in expected O(size of what changed): sections
/// whose structure revision is equal in both versions are not walked item by item.
///
/// In the spirit of Heckel's algorithm: identifiers are matched through hash tables, survivors
/// on one longest increasing subsequence stay put and the rest are listed as moves, so the set
/// of moves is minimal. A data change is an update, never a delete plus an insert.
public enum Differ {
    /// Everything a caller knows beyond the two snapshots: the writes' marks and where their
    /// items are in the new snapshot.
    public struct Hints: Sendable {
        public var marks: ChangeMarks
        /// New positions of every item named in `marks`.
        public var newLocations: [Identifier: ItemPath]

        public init(marks: ChangeMarks, newLocations: [Identifier: ItemPath]) {
            self.marks = marks
            self.newLocations = newLocations
        }
    }

    /// The changeset from `old` to `new`. Without hints, data changes inside sections whose item
    /// order did not change are found by comparing those sections item by item.
    ///
    /// - Complexity: for each section whose item order changed, O(k + m log m) for the k items
    ///   between the ends it shares with its old version, m of them in both (the longest
    ///   increasing subsequence); a section whose order provably did not change (its structure
    ///   revision) is not searched for moves. Without hints, its data is compared item by item.
    public static func changeset(from old: Snapshot, to new: Snapshot, hints: Hints? = nil) -> Changeset {
        var changeset = Changeset()
        diffSections(old, new, into: &changeset.sections)
        if let hints, !hints.marks.replacedEverything,
            let items = itemChangesAlongUntouchedItems(old, new, marks: hints.marks)
        {
            changeset.items = items
        } else {
            diffItemsOfRestructuredSections(old, new, into: &changeset.items)
        }
        diffDataOfUnrestructuredSections(old, new, hints: hints, into: &changeset.items)
        if let hints {
            addMarks(hints, new: new, into: &changeset)
        }
        changeset.sortLists()
        return changeset
    }

    private static func diffSections(_ old: Snapshot, _ new: Snapshot, into changes: inout SectionChanges) {
        // The usual version moves no section: the same identifiers in the same order, so only
        // their data can differ, and no lookup, list or subsequence is needed (the general path's
        // tables and lists would be a large share of a small write's allocations).
        if old.sections.count == new.sections.count,
            old.sections.indices.allSatisfy({ old.sections[$0].id == new.sections[$0].id })
        {
            for index in new.sections.indices where old.sections[index].data != new.sections[index].data {
                let section = new.sections[index]
                changes.updated.append(.init(at: index, id: section.id, data: section.data))
            }
            return
        }
        for (index, section) in old.sections.enumerated() where new.position(ofSection: section.id) == nil {
            changes.deleted.append(.init(at: index, id: section.id))
        }
        var survivorsOld: [Int] = []
        var survivorsNew: [Int] = []
        survivorsOld.reserveCapacity(new.sections.count)
        survivorsNew.reserveCapacity(new.sections.count)
        for (index, section) in new.sections.enumerated() {
            guard let oldIndex = old.position(ofSection: section.id) else {
                changes.inserted.append(.init(at: index, id: section.id, data: section.data))
                continue
            }
            survivorsOld.append(oldIndex)
            survivorsNew.append(index)
            if old.sections[oldIndex].data != section.data {
                changes.updated.append(.init(at: index, id: section.id, data: section.data))
            }
        }
        let staying = longestIncreasingSubsequenceMembers(survivorsOld)
        for (rank, stays) in staying.enumerated() where !stays {
            let to = survivorsNew[rank]
            changes.moved.append(.init(from: survivorsOld[rank], to: to, id: new.sections[to].id))
        }
    }

    /// A section whose structure revision differs (or that exists on one side only) is
    /// "restructured": only those are walked item by item.
    static func isRestructured(_ section: Section, in other: Snapshot) -> Bool {
        guard let index = other.position(ofSection: section.id) else { return true }
        return !other.sections[index].structureRevision.provesEqual(to: section.structureRevision)
    }

    /// The items a restructured section shares with its old version at its start and end, in
    /// the same order: they stay put, so only the middle needs hashing. Data changes among them
    /// are listed as the scan finds them.
    private static func commonEnds(
        old oldItems: ItemList, new newItems: ItemList, newSectionIndex: Int, into changes: inout ItemChanges
    ) -> (prefix: Int, suffix: Int) {
        let limit = min(oldItems.count, newItems.count)
        var prefix = 0
        var oldCursor = ItemList.Cursor(oldItems)
        var newCursor = ItemList.Cursor(newItems)
        while prefix < limit, oldCursor.id == newCursor.id {
            if oldCursor.data != newCursor.data {
                let item = newCursor.item
                changes.updated.append(.init(at: ItemPath(newSectionIndex, prefix), id: item.id, data: item.data))
            }
            prefix += 1
            oldCursor.advance()
            newCursor.advance()
        }
        var suffix = 0
        var oldBack = ItemList.BackwardCursor(oldItems)
        var newBack = ItemList.BackwardCursor(newItems)
        while suffix < limit - prefix, oldBack.id == newBack.id {
            if oldBack.data != newBack.data {
                let item = newBack.item
                let newIndex = newItems.count - 1 - suffix
                changes.updated.append(.init(at: ItemPath(newSectionIndex, newIndex), id: item.id, data: item.data))
            }
            suffix += 1
            oldBack.retreat()
            newBack.retreat()
        }
        return (prefix, suffix)
    }

    /// The full diff of the items of restructured sections: every old item between the common
    /// ends goes into one `IdentifierTable`, every new one is looked up in it once.
    private static func diffItemsOfRestructuredSections(
        _ old: Snapshot, _ new: Snapshot, into changes: inout ItemChanges
    ) {
        let (oldMiddles, newMiddles) = middles(old, new, into: &changes)
        let oldItems = OldItems(old, middles: oldMiddles)
        let table = identifierTable(of: oldItems)
        var claimed = [Bool](repeating: false, count: oldItems.count)
        for (sectionIndex, oldSectionIndex, middle) in newMiddles where !middle.isEmpty {
            match(
                middle, ofSection: sectionIndex, in: new, against: oldItems, of: oldSectionIndex, table: table,
                claimed: &claimed, into: &changes)
        }
        // What nobody claimed was removed; items of deleted sections go with their section unlisted.
        let surviving = old.sections.map { new.position(ofSection: $0.id) != nil }
        oldItems.forEachRun { firstPlace, run in
            for offset in run.indices where !claimed[oldItems.rank(firstPlace + offset)] {
                let path = oldItems.path(firstPlace + offset)
                if surviving[path.section] {
                    changes.deleted.append(.init(at: path, id: run[offset].id))
                }
            }
        }
    }

    /// The middle (between the common ends, which are listed as they are found) of every
    /// restructured section, old and new; the whole of every deleted section.
    private static func middles(_ old: Snapshot, _ new: Snapshot, into changes: inout ItemChanges) -> (
        old: [Range<Int>?], new: [(section: Int, oldSection: Int?, range: Range<Int>)]
    ) {
        var oldMiddles = [Range<Int>?](repeating: nil, count: old.sections.count)
        var newMiddles: [(section: Int, oldSection: Int?, range: Range<Int>)] = []
        for (sectionIndex, section) in new.sections.enumerated() where isRestructured(section, in: old) {
            guard let oldSectionIndex = old.position(ofSection: section.id) else {
                newMiddles.append((sectionIndex, nil, 0..<section.items.count))
                continue
            }
            let oldItems = old.sections[oldSectionIndex].items
            let ends = commonEnds(
                old: oldItems, new: section.items, newSectionIndex: sectionIndex, into: &changes)
            oldMiddles[oldSectionIndex] = ends.prefix..<(oldItems.count - ends.suffix)
            newMiddles.append((sectionIndex, oldSectionIndex, ends.prefix..<(section.items.count - ends.suffix)))
        }
        for (sectionIndex, section) in old.sections.enumerated() where new.position(ofSection: section.id) == nil {
            oldMiddles[sectionIndex] = 0..<section.items.count
        }
        return (oldMiddles, newMiddles)
    }

    /// The old items by identifier, each entered once.
    private static func identifierTable(of oldItems: OldItems) -> IdentifierTable {
        var table = IdentifierTable(capacity: oldItems.count)
        let distance = IdentifierTable.prefetchDistance
        oldItems.forEachRun { firstPlace, run in
            for offset in run.indices {
                if offset + distance < run.count { table.prefetch(hash: run[offset + distance].id.hashBits) }
                // Identifiers are compared only where the hash bits match another's.
                _ = table.insert(hash: run[offset].id.hashBits, at: firstPlace + offset) {
                    oldItems.identifier($0, equals: run[offset].id)
                }
            }
        }
        return table
    }

    /// Matches the new items of one section's middle with the old ones: an item no old one
    /// matches (or whose match is claimed) is inserted, a match in another section moved, a
    /// match with other data updated; survivors of the same section stay on one longest
    /// increasing subsequence of old positions, and the rest are moves.
    private static func match(
        _ middle: Range<Int>, ofSection sectionIndex: Int, in new: Snapshot, against oldItems: OldItems,
        of oldSectionIndex: Int?, table: borrowing IdentifierTable, claimed: inout [Bool],
        into changes: inout ItemChanges
    ) {
        let distance = IdentifierTable.prefetchDistance
        var stayCandidates: [(newIndex: Int, oldIndex: Int)] = []
        stayCandidates.reserveCapacity(middle.count)
        // In place: an item is copied only into the changes that list it.
        new.sections[sectionIndex].items.forEachRun(in: middle) { start, run in
            for offset in run.indices {
                if offset + distance < run.count { table.prefetch(hash: run[offset + distance].id.hashBits) }
                let newPath = ItemPath(sectionIndex, start + offset)
                guard
                    let place = table.find(
                        hash: run[offset].id.hashBits,
                        isIdentifier: { oldItems.identifier($0, equals: run[offset].id) }),
                    case let rank = oldItems.rank(place), !claimed[rank]
                else {
                    changes.inserted.append(.init(at: newPath, id: run[offset].id, data: run[offset].data))
                    continue
                }
                claimed[rank] = true
                let path = oldItems.path(place)
                if path.section == oldSectionIndex {
                    stayCandidates.append((newPath.item, path.item))
                } else {
                    changes.moved.append(.init(from: path, to: newPath, id: run[offset].id))
                }
                if !oldItems.hasSameData(place, as: run[offset]) {
                    changes.updated.append(.init(at: newPath, id: run[offset].id, data: run[offset].data))
                }
            }
        }
        guard let oldSectionIndex else { return }
        let staying = longestIncreasingSubsequenceMembers(stayCandidates.map(\.oldIndex))
        for (rank, stays) in staying.enumerated() where !stays {
            let candidate = stayCandidates[rank]
            changes.moved.append(
                .init(
                    from: ItemPath(oldSectionIndex, candidate.oldIndex),
                    to: ItemPath(sectionIndex, candidate.newIndex),
                    id: new.sections[sectionIndex].items[candidate.newIndex].id))
        }
    }

    /// The old items a full diff matches, read in place in their chunks (shared with the
    /// snapshot, never copied). Each is named by its place: the ordinal of its chunk here and
    /// its offset in it, in one number, so that a table slot leads straight to the item and to
    /// its path (a table from ranks to chunks would cost a second cache miss per lookup); and
    /// numbered by its rank, 0..<count in order, for the caller's tables.
    private struct OldItems {
        /// A chunk of an old section: the section, the position of its first item, its items
        /// pinned (valid while the snapshot is, which the diff borrows throughout; reading an
        /// item through them retains nothing), the offsets of the items the diff matches and
        /// the rank of the first.
        private struct Chunk {
            var section: Int
            var start: Int
            var items: ItemBuffer.Pinned
            var offsets: Range<Int>
            var firstRank: Int
        }

        /// Bits of a place that hold the offset: a chunk holds at most `ItemList.chunkCapacity`.
        private static let offsetBits = Int.bitWidth - (ItemList.chunkCapacity - 1).leadingZeroBitCount
        private static let offsetMask = (1 << offsetBits) - 1

        private var chunks: [Chunk] = []
        /// How many items the diff matches.
        private(set) var count = 0

        /// The items in `middles[section]` of each old section that has one; `old` must outlive
        /// this value.
        init(_ old: Snapshot, middles: [Range<Int>?]) {
            for (sectionIndex, middle) in middles.enumerated() {
                guard let middle, !middle.isEmpty else { continue }
                let list = old.sections[sectionIndex].items
                var (chunk, offset) = list.locate(middle.lowerBound)
                var position = middle.lowerBound
                while position < middle.upperBound {
                    let items = list.chunks[chunk].items.pinned
                    let end = min(items.count, offset + middle.upperBound - position)
                    chunks.append(
                        Chunk(
                            section: sectionIndex, start: position - offset, items: items, offsets: offset..<end,
                            firstRank: count))
                    count += end - offset
                    position += end - offset
                    chunk += 1
                    offset = 0
                }
            }
        }

        /// Calls `body` with the items of each chunk in order, and the place of the first.
        func forEachRun(_ body: (_ firstPlace: Int, _ items: UnsafeBufferPointer<Item>) -> Void) {
            for (ordinal, chunk) in chunks.enumerated() {
                body((ordinal << Self.offsetBits) | chunk.offsets.lowerBound, chunk.items.items(chunk.offsets))
            }
        }

        func rank(_ place: Int) -> Int {
            let chunk = chunks[place >> Self.offsetBits]
            return chunk.firstRank + (place & Self.offsetMask) - chunk.offsets.lowerBound
        }

        func identifier(_ place: Int, equals id: Identifier) -> Bool {
            chunks[place >> Self.offsetBits].items.identifier(at: place & Self.offsetMask, equals: id)
        }

        /// Whether the item at `place` holds the data of `other` (an item with its identifier).
        func hasSameData(_ place: Int, as other: Item) -> Bool {
            chunks[place >> Self.offsetBits].items.hasSameData(at: place & Self.offsetMask, as: other)
        }

        func path(_ place: Int) -> ItemPath {
            let chunk = chunks[place >> Self.offsetBits]
            return ItemPath(chunk.section, chunk.start + (place & Self.offsetMask))
        }
    }

    /// Sections whose item order is the same on both sides but whose content revision differs
    /// had item data set: with hints only the items the writes named are compared.
    private static func diffDataOfUnrestructuredSections(
        _ old: Snapshot, _ new: Snapshot, hints: Hints?, into changes: inout ItemChanges
    ) {
        if let hints {
            var found: [ItemChanges.Update] = []
            for id in hints.marks.dataChangedItems {
                guard let path = hints.newLocations[id] else { continue }
                let section = new.sections[path.section]
                guard let oldIndex = old.position(ofSection: section.id),
                    old.sections[oldIndex].structureRevision.provesEqual(to: section.structureRevision)
                else { continue }
                let data = section.items[path.item].data
                if old.sections[oldIndex].items[path.item].data != data {
                    found.append(.init(at: path, id: id, data: data))
                }
            }
            changes.updated.append(contentsOf: found.sorted { $0.at < $1.at })
            return
        }
        for (sectionIndex, section) in new.sections.enumerated() {
            guard let oldIndex = old.position(ofSection: section.id) else { continue }
            let oldSection = old.sections[oldIndex]
            guard oldSection.structureRevision.provesEqual(to: section.structureRevision),
                !oldSection.contentRevision.provesEqual(to: section.contentRevision)
            else { continue }
            for (itemIndex, (oldItem, item)) in zip(oldSection.items, section.items).enumerated()
            where oldItem.data != item.data {
                changes.updated.append(.init(at: ItemPath(sectionIndex, itemIndex), id: item.id, data: item.data))
            }
        }
    }

    /// Reloads and reconfigures the writes asked for, except of what this changeset inserts
    /// (an insertion already carries the item's current data).
    private static func addMarks(_ hints: Hints, new: Snapshot, into changeset: inout Changeset) {
        // Marks are listed also for what the same version inserted: a reload asked for is never
        // dropped (and a windowed subscriber that already shows the item needs it).
        let marks = hints.marks
        for id in marks.reloadedSections {
            if let index = new.position(ofSection: id) {
                changeset.sections.reloaded.append(.init(at: index, id: id))
            }
        }
        for id in marks.reloadedItems {
            if let path = hints.newLocations[id] {
                changeset.items.reloaded.append(.init(at: path, id: id))
            }
        }
        guard !marks.reconfiguredItems.isEmpty else { return }
        let alreadyUpdated = Set(changeset.items.updated.map(\.id))
        for id in marks.reconfiguredItems where !alreadyUpdated.contains(id) {
            if let path = hints.newLocations[id] {
                let data = new.sections[path.section].items[path.item].data
                changeset.items.updated.append(.init(at: path, id: id, data: data))
            }
        }
    }
}

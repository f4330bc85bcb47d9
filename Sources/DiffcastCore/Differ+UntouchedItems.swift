/// The differ's fast path for the common case: writes that say which items they inserted,
/// deleted or moved, so that every other item kept its relative order.
extension Differ {
    /// Where an item the writes restructured stood: its position, and how many untouched items
    /// of its section came before it (its gap in the untouched "backbone").
    private struct TouchedPlace {
        var path: ItemPath
        var sectionID: Identifier
        var gap: Int
    }

    /// A touched item of the new snapshot, with its data. A struct, not a tuple: an array of
    /// labelled tuples is copied through the runtime's generic tuple witness, for every item of
    /// a feed's append.
    private struct NewPlace {
        var id: Identifier
        var place: TouchedPlace
        var data: JSONText?
    }

    /// A gap between two untouched items of one section.
    private struct GapKey: Hashable {
        var section: Identifier
        var gap: Int
    }

    /// The item changes when the writes say which items they inserted, deleted or moved: every
    /// other item kept its relative order, so old and new sections are walked side by side
    /// comparing identifiers (no hashing), and only the restructured items are classified.
    /// Moves obey the longest-increasing-subsequence rule against the untouched items. Returns
    /// nil when sections came or went, or the walk finds the premise broken; the caller then
    /// runs the full diff.
    static func itemChangesAlongUntouchedItems(
        _ old: Snapshot, _ new: Snapshot, marks: ChangeMarks
    ) -> ItemChanges? {
        guard old.sections.count == new.sections.count,
            new.sections.allSatisfy({ old.position(ofSection: $0.id) != nil })
        else { return nil }
        var touched = TouchedItems(marks: marks)
        for (newSectionIndex, section) in new.sections.enumerated() where isRestructured(section, in: old) {
            guard let oldSectionIndex = old.position(ofSection: section.id),
                touched.walk(
                    old.sections[oldSectionIndex].items, at: oldSectionIndex, section, at: newSectionIndex,
                    appended: marks.appendedCount(ofSectionAt: newSectionIndex))
            else { return nil }
        }
        return touched.classified(old)
    }

    /// What a walk along untouched items found: items updated in place, and where each touched
    /// item was and is (its section and the gap between untouched items it sits in).
    private struct TouchedItems {
        let restructured: Set<Identifier>
        var changes = ItemChanges()
        var oldPlaces: [Identifier: TouchedPlace] = [:]
        /// In the order of the new snapshot, with their data: a feed's new items then come out
        /// listed in order, and none is looked up again.
        var newPlaces: [NewPlace] = []

        init(marks: ChangeMarks) {
            restructured = marks.restructuredItems
            oldPlaces.reserveCapacity(restructured.count)
            newPlaces.reserveCapacity(restructured.count + marks.appendedTails.reduce(0) { $0 + $1.count })
        }

        /// Walks one section's old and new items side by side; false when an item neither kept
        /// its place nor was touched (the premise is broken).
        mutating func walk(
            _ oldItems: ItemList, at oldSectionIndex: Int, _ section: Section, at newSectionIndex: Int, appended: Int
        ) -> Bool {
            let shared = oldItems.sharedChunks(with: section.items)
            var oldCursor = ItemList.Cursor(oldItems, atChunk: shared.leading)
            var newCursor = ItemList.Cursor(section.items, atChunk: shared.leading)
            // The items of the leading shared chunks, in place.
            var gap = newCursor.position
            // Where the trailing shared chunks start: from there on both hold the same items in
            // place, which add nothing to list.
            let oldTail = oldItems.chunks.count - shared.trailing
            let newTail = section.items.chunks.count - shared.trailing
            // Where the items appended at the end start: each is new, and needs no lookup. Like
            // the set, the count only lets the walk take a new-side item as touched: an untouched
            // item is always matched in place before (untouched items keep their order), so a
            // wrong count could cost the walk (false, and the full diff), never the result.
            let appendedStart = section.items.count - appended
            while !oldCursor.atEnd || !newCursor.atEnd {
                if oldCursor.chunk == oldTail, newCursor.chunk == newTail, oldCursor.atChunkStart,
                    newCursor.atChunkStart
                {
                    break
                } else if Self.atSharedChunk(oldCursor, newCursor) {
                    // A chunk both versions share: its items are the same, in place.
                    gap += oldCursor.currentChunk.items.count
                    oldCursor.skipChunk()
                    newCursor.skipChunk()
                } else if case let run = ItemList.Cursor.identicalRun(oldCursor, newCursor), run > 0 {
                    // Items both versions still share, in place.
                    gap += run
                    oldCursor.advance(by: run)
                    newCursor.advance(by: run)
                } else if !oldCursor.atEnd, !newCursor.atEnd, oldCursor.id == newCursor.id {
                    if oldCursor.data != newCursor.data {
                        let item = newCursor.item
                        changes.updated.append(
                            .init(at: ItemPath(newSectionIndex, newCursor.position), id: item.id, data: item.data))
                    }
                    gap += 1
                    oldCursor.advance()
                    newCursor.advance()
                } else if !oldCursor.atEnd, restructured.contains(oldCursor.id) {
                    oldPlaces[oldCursor.id] = TouchedPlace(
                        path: ItemPath(oldSectionIndex, oldCursor.position), sectionID: section.id, gap: gap)
                    oldCursor.advance()
                } else if !newCursor.atEnd,
                    newCursor.position >= appendedStart || restructured.contains(newCursor.id)
                {
                    let place = TouchedPlace(
                        path: ItemPath(newSectionIndex, newCursor.position), sectionID: section.id, gap: gap)
                    let item = newCursor.item
                    newPlaces.append(NewPlace(id: item.id, place: place, data: item.data))
                    newCursor.advance()
                } else {
                    return false
                }
            }
            return true
        }

        /// Whether both cursors stand at the start of the same chunk, unchanged since both
        /// versions shared it.
        private static func atSharedChunk(_ old: ItemList.Cursor, _ new: ItemList.Cursor) -> Bool {
            old.atChunkStart && new.atChunkStart && old.currentChunk.id == new.currentChunk.id
                && old.currentChunk.revision == new.currentChunk.revision
        }

        /// The touched items classified: new ones inserted, gone ones deleted, survivors updated
        /// when their data changed and moved unless they may stay put. Per gap, the survivors
        /// that stayed in their section and gap on one longest increasing subsequence of old
        /// positions stay; the rest are moves. The last step: it takes the places the walks found.
        mutating func classified(_ old: Snapshot) -> ItemChanges {
            var stayCandidates: [GapKey: [(id: Identifier, old: TouchedPlace, new: TouchedPlace)]] = [:]
            // Nothing left on the old side (a feed's appends): every touched item is inserted.
            if oldPlaces.isEmpty { changes.inserted.reserveCapacity(changes.inserted.count + newPlaces.count) }
            for touched in newPlaces {
                let (id, newPlace, newData) = (touched.id, touched.place, touched.data)
                // Nothing left on the old side (a feed's appends): no lookup to make.
                guard !oldPlaces.isEmpty, let oldPlace = oldPlaces.removeValue(forKey: id) else {
                    changes.inserted.append(.init(at: newPlace.path, id: id, data: newData))
                    continue
                }
                let oldData = old.sections[oldPlace.path.section].items[oldPlace.path.item].data
                if oldData != newData {
                    changes.updated.append(.init(at: newPlace.path, id: id, data: newData))
                }
                if oldPlace.sectionID == newPlace.sectionID && oldPlace.gap == newPlace.gap {
                    stayCandidates[GapKey(section: newPlace.sectionID, gap: newPlace.gap), default: []]
                        .append((id, oldPlace, newPlace))
                } else {
                    changes.moved.append(.init(from: oldPlace.path, to: newPlace.path, id: id))
                }
            }
            for (_, group) in stayCandidates {
                let ordered = group.sorted { $0.new.path.item < $1.new.path.item }
                let staying = longestIncreasingSubsequenceMembers(ordered.map(\.old.path.item))
                for (rank, stays) in staying.enumerated() where !stays {
                    let candidate = ordered[rank]
                    changes.moved.append(.init(from: candidate.old.path, to: candidate.new.path, id: candidate.id))
                }
            }
            changes.deleted = oldPlaces.map { .init(at: $0.value.path, id: $0.key) }
            return changes
        }
    }
}

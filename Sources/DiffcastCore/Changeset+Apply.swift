/// Why a changeset does not fit the state it is applied to.
public struct ChangesetMismatch: Error, Hashable, Sendable, CustomStringConvertible {
    public let description: String

    init(_ description: String) {
        self.description = description
    }
}

extension Changeset {
    /// SPEC.md's normative client algorithm, in its five steps: turns the state a changeset was
    /// computed from into the state it leads to, or throws where the changeset does not fit. On
    /// chunked item lists, so it costs what the changeset lists (times the chunk table of a
    /// touched section), not what the collection holds.
    ///
    /// - Complexity: proportional to the changes listed, plus the chunk table of each touched
    ///   section; not to the items the collection holds.
    public func apply(to state: Snapshot) throws(ChangesetMismatch) -> Snapshot {
        var sectionsNow = state.sections
        let movedItems = try takeItemsOut(of: &sectionsNow)
        let movedSections = try takeSectionsOut(of: &sectionsNow)
        try putSectionsIn(&sectionsNow, moved: movedSections)
        try putItemsIn(&sectionsNow, moved: movedItems)
        try setData(in: &sectionsNow)
        // The result is no longer vouched for by the revisions its sections had.
        for index in sectionsNow.indices {
            sectionsNow[index].structureRevision = .unknown
            sectionsNow[index].contentRevision = .unknown
        }
        return Snapshot(uncheckedSections: sectionsNow)
    }

    /// Step 1: items out at old coordinates; returns the moved ones by identifier.
    private func takeItemsOut(of sectionsNow: inout [Section]) throws(ChangesetMismatch) -> [Identifier: Item] {
        var removals: [Int: [(position: Int, id: Identifier)]] = [:]
        var movedItems: [Identifier: Item] = [:]
        for deletion in items.deleted {
            let item = try item(at: deletion.at, in: sectionsNow, "items.deleted")
            guard item.id == deletion.id else {
                throw ChangesetMismatch("items.deleted \(deletion.at) holds '\(item.id)', not '\(deletion.id)'")
            }
            removals[deletion.at.section, default: []].append((deletion.at.item, item.id))
        }
        for move in items.moved {
            let item = try item(at: move.from, in: sectionsNow, "items.moved")
            guard item.id == move.id else {
                throw ChangesetMismatch("items.moved from \(move.from) holds '\(item.id)', not '\(move.id)'")
            }
            movedItems[move.id] = item
            removals[move.from.section, default: []].append((move.from.item, item.id))
        }
        for (section, entries) in removals {
            let descending = entries.sorted { $0.position > $1.position }
            for (earlier, later) in zip(descending.dropFirst(), descending) where earlier.position == later.position {
                throw ChangesetMismatch("item [\(section),\(later.position)] is taken out twice")
            }
            if descending.count > Self.removalsOneByOne {
                let ids = Set(descending.map(\.id))
                sectionsNow[section].items.removeAll { ids.contains($0.id) }
            } else {
                for entry in descending { sectionsNow[section].items.remove(at: entry.position) }
            }
        }
        return movedItems
    }

    /// Step 2: sections out at old indices; returns the moved ones, with the items they still hold.
    private func takeSectionsOut(of sectionsNow: inout [Section]) throws(ChangesetMismatch) -> [Identifier: Section] {
        var removedSections = Set<Int>()
        var movedSections: [Identifier: Section] = [:]
        for deletion in sections.deleted {
            guard sectionsNow.indices.contains(deletion.at), sectionsNow[deletion.at].id == deletion.id else {
                throw ChangesetMismatch("sections.deleted \(deletion.at) does not hold '\(deletion.id)'")
            }
            removedSections.insert(deletion.at)
        }
        for move in sections.moved {
            guard sectionsNow.indices.contains(move.from), sectionsNow[move.from].id == move.id else {
                throw ChangesetMismatch("sections.moved from \(move.from) does not hold '\(move.id)'")
            }
            movedSections[move.id] = sectionsNow[move.from]
            removedSections.insert(move.from)
        }
        guard removedSections.count == sections.deleted.count + sections.moved.count else {
            throw ChangesetMismatch("a section is taken out twice")
        }
        sectionsNow = sectionsNow.enumerated().filter { !removedSections.contains($0.offset) }.map(\.element)
        return movedSections
    }

    /// Step 3: sections in at new indices, ascending.
    private func putSectionsIn(_ sectionsNow: inout [Section], moved movedSections: [Identifier: Section])
        throws(ChangesetMismatch)
    {
        var sectionArrivals = sections.inserted.map { ($0.at, Section(id: $0.id, data: $0.data)) }
        for move in sections.moved {
            guard let section = movedSections[move.id] else { continue }
            sectionArrivals.append((move.to, section))
        }
        for (index, section) in sectionArrivals.sorted(by: { $0.0 < $1.0 }) {
            guard index >= 0, index <= sectionsNow.count else {
                throw ChangesetMismatch("section insert at \(index) out of range")
            }
            sectionsNow.insert(section, at: index)
        }
    }

    /// Step 4: items in at new coordinates, ascending by section then index; runs of consecutive
    /// positions go in together.
    private func putItemsIn(_ sectionsNow: inout [Section], moved: [Identifier: Item]) throws(ChangesetMismatch) {
        var movedItems = moved
        var itemArrivals = items.inserted.map { ($0.at, Item(id: $0.id, data: $0.data)) }
        for move in items.moved {
            guard let item = movedItems.removeValue(forKey: move.id) else {
                throw ChangesetMismatch("item '\(move.id)' is moved twice")
            }
            itemArrivals.append((move.to, item))
        }
        if let negative = itemArrivals.first(where: { $0.0.section < 0 || $0.0.item < 0 }) {
            throw ChangesetMismatch("item insert at \(negative.0) out of range")
        }
        itemArrivals.sort { $0.0 < $1.0 }
        var run = 0
        while run < itemArrivals.count {
            let start = itemArrivals[run].0
            var end = run + 1
            // Indices come from the wire: a run grows while the next index is one more, compared
            // by a difference of two non-negative indices, which cannot overflow near Int.max.
            while end < itemArrivals.count, itemArrivals[end].0.section == start.section,
                itemArrivals[end].0.item - start.item == end - run
            {
                end += 1
            }
            guard sectionsNow.indices.contains(start.section), start.item >= 0,
                start.item <= sectionsNow[start.section].items.count
            else { throw ChangesetMismatch("item insert at \(start) out of range") }
            _ = sectionsNow[start.section].items.insert(
                contentsOf: itemArrivals[run..<end].map(\.1), at: start.item)
            run = end
        }
    }

    /// Step 5: data, which updates set and reloads only name.
    private func setData(in sectionsNow: inout [Section]) throws(ChangesetMismatch) {
        for update in sections.updated {
            guard sectionsNow.indices.contains(update.at), sectionsNow[update.at].id == update.id else {
                throw ChangesetMismatch("sections.updated \(update.at) does not hold '\(update.id)'")
            }
            sectionsNow[update.at].data = update.data
        }
        for update in items.updated {
            let item = try item(at: update.at, in: sectionsNow, "items.updated")
            guard item.id == update.id else {
                throw ChangesetMismatch("items.updated \(update.at) holds '\(item.id)', not '\(update.id)'")
            }
            sectionsNow[update.at.section].items.setData(update.data, at: update.at.item)
        }
        for reload in sections.reloaded {
            guard sectionsNow.indices.contains(reload.at), sectionsNow[reload.at].id == reload.id else {
                throw ChangesetMismatch("sections.reloaded \(reload.at) does not hold '\(reload.id)'")
            }
        }
        for reload in items.reloaded {
            let item = try item(at: reload.at, in: sectionsNow, "items.reloaded")
            guard item.id == reload.id else {
                throw ChangesetMismatch("items.reloaded \(reload.at) holds '\(item.id)', not '\(reload.id)'")
            }
        }
    }

    private static let removalsOneByOne = 16

    private func item(at path: ItemPath, in sections: [Section], _ what: String) throws(ChangesetMismatch) -> Item {
        guard sections.indices.contains(path.section), path.item >= 0, path.item < sections[path.section].items.count
        else { throw ChangesetMismatch("\(what) \(path) out of range") }
        return sections[path.section].items[path.item]
    }
}

/// Why a changeset does not fit the state it is applied to.
public struct ChangesetMismatch: Error, Hashable, Sendable, CustomStringConvertible {
    public let description: String

    init(_ description: String) {
        self.description = description
    }
}

extension Changeset {
    /// SPEC.md's normative client algorithm: turns the state a changeset was computed from into
    /// the state it leads to, or throws where the changeset does not fit.
    public func apply(to state: [SectionOutline]) throws(ChangesetMismatch) -> [SectionOutline] {
        var sectionsNow = state
        // 1. Items out at old coordinates, moved ones kept by identifier.
        var removals: [Int: Set<Int>] = [:]
        var movedItems: [Identifier: Item] = [:]
        for path in items.deleted {
            try check(path, in: sectionsNow, "items.deleted")
            removals[path.section, default: []].insert(path.item)
        }
        for move in items.moved {
            try check(move.from, in: sectionsNow, "items.moved")
            let item = sectionsNow[move.from.section].items[move.from.item]
            guard item.id == move.id else {
                throw ChangesetMismatch("items.moved from \(move.from) holds '\(item.id)', not '\(move.id)'")
            }
            movedItems[move.id] = item
            removals[move.from.section, default: []].insert(move.from.item)
        }
        for (section, indices) in removals {
            for index in indices.sorted(by: >) {
                sectionsNow[section].items.remove(at: index)
            }
        }
        // 2. Sections out at old indices, moved ones kept with their remaining items.
        var removedSections = Set(sections.deleted)
        var movedSections: [Identifier: SectionOutline] = [:]
        for index in sections.deleted where !sectionsNow.indices.contains(index) {
            throw ChangesetMismatch("sections.deleted \(index) out of range")
        }
        for move in sections.moved {
            guard sectionsNow.indices.contains(move.from), sectionsNow[move.from].id == move.id else {
                throw ChangesetMismatch("sections.moved from \(move.from) does not hold '\(move.id)'")
            }
            movedSections[move.id] = sectionsNow[move.from]
            removedSections.insert(move.from)
        }
        for index in removedSections.sorted(by: >) {
            sectionsNow.remove(at: index)
        }
        // 3. Sections in at new indices, ascending.
        var sectionArrivals = sections.inserted.map { ($0.index, SectionOutline(id: $0.id, data: $0.data)) }
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
        // 4. Items in at new coordinates, ascending by section then index.
        var itemArrivals = items.inserted.map { ($0.at, Item(id: $0.id, data: $0.data)) }
        for move in items.moved {
            guard let item = movedItems[move.id] else { continue }
            itemArrivals.append((move.to, item))
        }
        for (path, item) in itemArrivals.sorted(by: { $0.0 < $1.0 }) {
            guard sectionsNow.indices.contains(path.section), path.item >= 0,
                path.item <= sectionsNow[path.section].items.count
            else { throw ChangesetMismatch("item insert at \(path) out of range") }
            sectionsNow[path.section].items.insert(item, at: path.item)
        }
        // 5. Data.
        for update in sections.updated {
            guard sectionsNow.indices.contains(update.index), sectionsNow[update.index].id == update.id else {
                throw ChangesetMismatch("sections.updated \(update.index) does not hold '\(update.id)'")
            }
            sectionsNow[update.index].data = update.data
        }
        for update in items.updated {
            try check(update.at, in: sectionsNow, "items.updated")
            guard sectionsNow[update.at.section].items[update.at.item].id == update.id else {
                throw ChangesetMismatch("items.updated \(update.at) does not hold '\(update.id)'")
            }
            sectionsNow[update.at.section].items[update.at.item].data = update.data
        }
        for reload in items.reloaded {
            try check(reload.at, in: sectionsNow, "items.reloaded")
            guard sectionsNow[reload.at.section].items[reload.at.item].id == reload.id else {
                throw ChangesetMismatch("items.reloaded \(reload.at) does not hold '\(reload.id)'")
            }
        }
        return sectionsNow
    }

    private func check(_ path: ItemPath, in state: [SectionOutline], _ what: String) throws(ChangesetMismatch) {
        guard state.indices.contains(path.section), state[path.section].items.indices.contains(path.item) else {
            throw ChangesetMismatch("\(what) \(path) out of range")
        }
    }
}

import Testing

@testable import DiffcastCore

/// `Changeset.apply` is the applier the clients and several suites follow a stream with: it must
/// refuse every entry whose identifier is not the one at its position, by itself, with no digest
/// check behind it to notice. Each case changes one identifier of a changeset that applies.
@Suite struct ChangesetApplyTests {
    /// Sections "s" [a b c] and "t" [d].
    private static let state = Snapshot(uncheckedSections: [
        Section(id: "s", items: [Item(id: "a"), Item(id: "b"), Item(id: "c")]),
        Section(id: "t", items: [Item(id: "d")]),
    ])

    private static func outline(_ snapshot: Snapshot) -> [[String]] {
        snapshot.outline.map { [$0.id.description] + $0.items.map(\.id.description) }
    }

    /// One changeset per kind of entry that names an identifier at a position, with what it
    /// leads to from `state` when it is right.
    private static let cases: [(name: String, changeset: Changeset, after: [[String]])] = {
        var deleted = Changeset()
        deleted.items.deleted = [.init(at: ItemPath(0, 1), id: "b")]
        var moved = Changeset()
        moved.items.moved = [.init(from: ItemPath(0, 0), to: ItemPath(1, 1), id: "a")]
        var updated = Changeset()
        updated.items.updated = [.init(at: ItemPath(0, 2), id: "c", data: nil)]
        var reloaded = Changeset()
        reloaded.items.reloaded = [.init(at: ItemPath(1, 0), id: "d")]
        var sectionDeleted = Changeset()
        sectionDeleted.sections.deleted = [.init(at: 1, id: "t")]
        var sectionMoved = Changeset()
        sectionMoved.sections.moved = [.init(from: 1, to: 0, id: "t")]
        var sectionUpdated = Changeset()
        sectionUpdated.sections.updated = [.init(at: 0, id: "s", data: nil)]
        var sectionReloaded = Changeset()
        sectionReloaded.sections.reloaded = [.init(at: 1, id: "t")]
        return [
            ("items.deleted", deleted, [["s", "a", "c"], ["t", "d"]]),
            ("items.moved", moved, [["s", "b", "c"], ["t", "d", "a"]]),
            ("items.updated", updated, [["s", "a", "b", "c"], ["t", "d"]]),
            ("items.reloaded", reloaded, [["s", "a", "b", "c"], ["t", "d"]]),
            ("sections.deleted", sectionDeleted, [["s", "a", "b", "c"]]),
            ("sections.moved", sectionMoved, [["t", "d"], ["s", "a", "b", "c"]]),
            ("sections.updated", sectionUpdated, [["s", "a", "b", "c"], ["t", "d"]]),
            ("sections.reloaded", sectionReloaded, [["s", "a", "b", "c"], ["t", "d"]]),
        ]
    }()

    @Test func eachRightEntryApplies() throws {
        for (name, changeset, after) in Self.cases {
            #expect(Self.outline(try changeset.apply(to: Self.state)) == after, "\(name)")
        }
    }

    /// The same entries naming "x", which is nowhere: each is refused, naming the entry's kind.
    @Test func anEntryNamingAnotherIdentifierIsRefused() {
        for (name, right, _) in Self.cases {
            var wrong = right
            wrong.items.deleted = wrong.items.deleted.map { .init(at: $0.at, id: "x") }
            wrong.items.moved = wrong.items.moved.map { .init(from: $0.from, to: $0.to, id: "x") }
            wrong.items.updated = wrong.items.updated.map { .init(at: $0.at, id: "x", data: nil) }
            wrong.items.reloaded = wrong.items.reloaded.map { .init(at: $0.at, id: "x") }
            wrong.sections.deleted = wrong.sections.deleted.map { .init(at: $0.at, id: "x") }
            wrong.sections.moved = wrong.sections.moved.map { .init(from: $0.from, to: $0.to, id: "x") }
            wrong.sections.updated = wrong.sections.updated.map { .init(at: $0.at, id: "x", data: nil) }
            wrong.sections.reloaded = wrong.sections.reloaded.map { .init(at: $0.at, id: "x") }
            do {
                _ = try wrong.apply(to: Self.state)
                Issue.record("\(name) naming 'x' was applied")
            } catch {
                #expect(error.description.contains(name), "\(name): \(error.description)")
            }
        }
    }

    /// An item deletion naming another item that is in the collection (at another position) is
    /// refused too: the applier checks the position's identifier, not that the item exists.
    @Test func aDeletionNamingAnItemElsewhereIsRefused() {
        var changeset = Changeset()
        changeset.items.deleted = [.init(at: ItemPath(0, 0), id: "b")]
        #expect(throws: ChangesetMismatch.self) { try changeset.apply(to: Self.state) }
    }
}

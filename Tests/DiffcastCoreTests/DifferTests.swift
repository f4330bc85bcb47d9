import DiffcastTestSupport
import Testing

@testable import DiffcastCore

@Suite struct DifferTests {
    private func changeset(_ before: String, _ after: String) throws -> Changeset {
        var document = try document([("s", before.map(String.init))])
        let base = document.snapshot
        try document.apply(
            .apply(sections: [SectionInput(id: "s", items: after.map { Item(id: Identifier(String($0))) })]))
        return document.changeset(since: base)
    }

    @Test(arguments: [
        ("abcdef", "bcdefa", 1), ("abcdef", "fabcde", 1), ("abcdef", "bacdef", 1),
        ("abcdef", "fedcba", 5), ("abcdef", "acebdf", 2), ("abcdef", "abcdef", 0),
    ])
    func movesAreTheFewestPossible(before: String, after: String, moves: Int) throws {
        let changes = try changeset(before, after)
        #expect(changes.items.moved.count == moves)
        #expect(changes.items.inserted.isEmpty && changes.items.deleted.isEmpty)
    }

    @Test func movingOneSectionToTheEndIsOneSectionMove() throws {
        var document = try document(["P", "Q", "R", "S", "T"].map { ($0, [$0 + "1"]) })
        let base = document.snapshot
        try document.apply(.moveSection("P", anchor: .after("T")))
        let changes = document.changeset(since: base)
        #expect(changes.sections.moved.count == 1 && changes.items.moved.isEmpty)
        #expect(changes.sections.moved == [.init(from: 0, to: 4, id: "P")])
    }

    @Test func movesByWritesKeepEveryUntouchedItemInPlace() throws {
        let ids = (0..<100).map { "x\($0)" }
        var document = try document([("s", ids)])
        var base = document.snapshot
        try document.apply(.moveItem("x0", anchor: .after("x99")))
        #expect(
            document.changeset(since: base).items.moved == [.init(from: ItemPath(0, 0), to: ItemPath(0, 99), id: "x0")])
        base = document.snapshot
        // Moved to where it already is: nothing to publish.
        try document.apply(.moveItem("x50", anchor: .after("x49")))
        #expect(document.changeset(since: base).isEmpty)
        base = document.snapshot
        try document.apply(.moveItem("x10", anchor: .before("x20")))
        try document.apply(.moveItem("x11", anchor: .before("x20")))
        try document.apply(.deleteItems(["x30"]))
        try document.apply(.insertItems([Item(id: "n")], anchor: .after("x40")))
        let changes = document.changeset(since: base)
        #expect(changes.items.moved.count == 2)
        #expect(changes.items.deleted.count == 1 && changes.items.inserted.count == 1)
        try checkStrictly(changes, from: plain(base), to: plain(document.snapshot))
    }

    @Test func aDataChangeIsOneUpdateAndNothingElse() throws {
        var document = Document()
        try document.apply(
            .apply(sections: [
                SectionInput(id: "today", items: [Item(id: "t1", data: data("{\"likes\":1000}")), Item(id: "t2")])
            ]))
        let base = document.snapshot
        _ = document.takeMarks()
        try document.apply(.updateItems([DataUpdate(id: "t1", data: data("{\"likes\":2000}"))]))
        let changes = document.changeset(since: base)
        #expect(changes.sections.isEmpty)
        #expect(changes.items.updated == [.init(at: ItemPath(0, 0), id: "t1", data: data("{\"likes\":2000}"))])
        #expect(changes.items.inserted.isEmpty && changes.items.deleted.isEmpty && changes.items.moved.isEmpty)
    }

    @Test func settingTheSameDataPublishesNothing() throws {
        var document = try document([("s", ["a"])])
        try document.apply(.updateItems([DataUpdate(id: "a", data: data("1"))]))
        let base = document.snapshot
        _ = document.takeMarks()
        try document.apply(.updateItems([DataUpdate(id: "a", data: data("1"))]))
        #expect(document.changeset(since: base).isEmpty)
    }

    @Test func insertingThenDeletingInOneBatchListsNothing() throws {
        var document = try document([("s", ["a", "b"])])
        let base = document.snapshot
        try document.apply(.appendItems([Item(id: "x")], section: "s"))
        try document.apply(.deleteItems(["x"]))
        #expect(document.changeset(since: base).isEmpty)
    }

    /// Appends are marked by count, not one by one (`ChangeMarks.appendedTails`): the items
    /// appended to two sections come out as inserts at the ends, and a write of another kind
    /// after them (a move of one, a delete of another) still finds them where they went.
    @Test func appendedItemsAreListedWhereverLaterWritesTakeThem() throws {
        var document = try document([("A", (0..<10).map { "a\($0)" }), ("B", ["b0"])])
        let base = document.snapshot
        try document.apply(.appendItems([Item(id: "n1"), Item(id: "n2")], section: "A"))
        try document.apply(.appendItems([Item(id: "m1")], section: "B"))
        try document.apply(.appendItems([Item(id: "n3", data: data("3"))], section: "A"))
        var onlyAppended = document
        let appended = onlyAppended.changeset(since: base)
        #expect(
            appended.items.inserted == [
                .init(at: ItemPath(0, 10), id: "n1", data: nil), .init(at: ItemPath(0, 11), id: "n2", data: nil),
                .init(at: ItemPath(0, 12), id: "n3", data: data("3")), .init(at: ItemPath(1, 1), id: "m1", data: nil),
            ])
        #expect(appended.items.moved.isEmpty && appended.items.deleted.isEmpty)

        try document.apply(.moveItem("n2", anchor: .before("a0")))
        try document.apply(.deleteItems(["m1", "a3"]))
        try document.apply(.appendItems([Item(id: "n4")], section: "B"))
        let changes = document.changeset(since: base)
        try checkStrictly(changes, from: plain(base), to: plain(document.snapshot))
        #expect(changes.items.inserted.map(\.id) == ["n2", "n1", "n3", "n4"])
        #expect(changes.items.deleted == [.init(at: ItemPath(0, 3), id: "a3")])
        #expect(changes.items.moved.isEmpty)
    }

    @Test func anItemThatMovesAcrossSectionsAndChangesIsMovedAndUpdated() throws {
        var document = try document([("A", ["a1", "a2"]), ("B", ["b1"])])
        let base = document.snapshot
        try document.apply(.moveItem("a1", anchor: .after("b1")))
        try document.apply(.updateItems([DataUpdate(id: "a1", data: data("true"))]))
        let changes = document.changeset(since: base)
        #expect(changes.items.moved == [.init(from: ItemPath(0, 0), to: ItemPath(1, 1), id: "a1")])
        #expect(changes.items.updated == [.init(at: ItemPath(1, 1), id: "a1", data: data("true"))])
    }

    @Test func reloadsAndReconfiguresAreListedAtTheirNewPositions() throws {
        var document = try document([("A", ["a1", "a2"])])
        let base = document.snapshot
        try document.apply(.reloadItems(["a2"]))
        try document.apply(.reconfigureItems(["a1"]))
        try document.apply(.reloadSections(["A"]))
        try document.apply(.moveItem("a2", anchor: .before("a1")))
        let changes = document.changeset(since: base)
        #expect(changes.items.reloaded == [.init(at: ItemPath(0, 0), id: "a2")])
        #expect(changes.items.updated == [.init(at: ItemPath(0, 1), id: "a1", data: nil)])
        #expect(changes.sections.reloaded == [.init(at: 0, id: "A")])
    }

    @Test func itemsOfADeletedSectionAreNotListedUnlessTheyMoveOut() throws {
        var document = try document([("A", ["a1", "a2"]), ("B", ["b1"])])
        let base = document.snapshot
        try document.apply(.moveItem("a2", anchor: .after("b1")))
        try document.apply(.deleteSections(["A"]))
        let changes = document.changeset(since: base)
        #expect(changes.sections.deleted == [.init(at: 0, id: "A")])
        #expect(changes.items.deleted.isEmpty)
        #expect(changes.items.moved == [.init(from: ItemPath(0, 1), to: ItemPath(0, 1), id: "a2")])
    }

    /// apply(diff(a, b), a) == b over thousands of random pairs, checked by the strict oracle
    /// (order of every list, identifiers of deletions, minimal moves, updates that change data)
    /// through every path: the batch path with the writes' hints, and the plain diff between two
    /// snapshots that a catch-up sends. The project's own applier and digest must agree with it.
    @Test(arguments: 0..<8)
    func everyChangesetPassesTheStrictOracle(seedBlock: Int) throws {
        var rng = SplitMix64(seed: UInt64(seedBlock) &* 7919 &+ 1)
        var document = Document()
        var history: [Snapshot] = [document.snapshot]
        var publishedChanges = 0
        for step in 0..<600 {
            let base = document.snapshot
            var reconfigured = false
            for _ in 0..<Int.random(in: 1...5, using: &rng) {
                let operation = randomWrite(document, using: &rng)
                if (try? document.apply(operation)) != nil, operation.reconfigures { reconfigured = true }
            }
            let changes = document.changeset(since: base)
            if !changes.isEmpty { publishedChanges += 1 }
            let now = plain(document.snapshot)
            do {
                try checkStrictly(changes, from: plain(base), to: now, updatesMayRepeatData: reconfigured)
            } catch {
                Issue.record("seed block \(seedBlock) step \(step), batch path: \(error)")
            }
            #expect(plain(try changes.apply(to: base)) == now, "own applier, step \(step)")
            #expect(Digest(of: document.snapshot).description == ReferenceDigest.of(now), "digest, step \(step)")
            let older = history[Int.random(in: 0..<history.count, using: &rng)]
            let catchUp = Differ.changeset(from: older, to: document.snapshot)
            do {
                try checkStrictly(catchUp, from: plain(older), to: now)
            } catch {
                Issue.record("seed block \(seedBlock) step \(step), catch-up path: \(error)")
            }
            history.append(document.snapshot)
            if history.count > 20 { history.removeFirst() }
        }
        // The walk must really change things, or it proves nothing.
        #expect(publishedChanges > 300)
    }

    /// Two documents' snapshots are never taken for each other: revisions are unique across
    /// documents, so the differ looks at the items.
    @Test func snapshotsOfTwoDocumentsAreDiffedByTheirItems() throws {
        let first = try document([("s", ["a", "b"])])
        let second = try document([("s", ["b", "c"])])
        let changes = Differ.changeset(from: first.snapshot, to: second.snapshot)
        try checkStrictly(changes, from: plain(first.snapshot), to: plain(second.snapshot))
        #expect(!changes.isEmpty)
    }

    @Test func everyMoveKeepsALongestIncreasingSubsequenceInPlace() throws {
        var rng = SplitMix64(seed: 99)
        for _ in 0..<200 {
            let count = Int.random(in: 1...30, using: &rng)
            let before: [Identifier] = (0..<count).map { "x\($0)" }
            let after = before.shuffled(using: &rng)
            var document = try document([("s", before.map(\.text))])
            let base = document.snapshot
            try document.apply(.apply(sections: [SectionInput(id: "s", items: after.map { Item(id: $0) })]))
            let changes = document.changeset(since: base)
            let oldPositions = after.map { id in before.firstIndex(of: id) ?? 0 }
            #expect(changes.items.moved.count == count - longestIncreasingLength(oldPositions))
        }
    }

    /// The full diff's table matches by hash and then by identifier: identifiers forced onto
    /// four hashes, shuffled, some dropped and some added, still diff exactly.
    @Test func identifiersThatShareAHashAreToldApart() throws {
        func colliding(_ text: String) -> Identifier {
            Identifier(text, hashForTesting: text.utf8.reduce(0) { $0 &+ Int($1) } % 4)
        }
        var rng = SplitMix64(seed: 5)
        for _ in 0..<50 {
            let before = (0..<24).map { colliding("c\($0)") }
            var after = before.shuffled(using: &rng).filter { _ in Int.random(in: 0..<5, using: &rng) > 0 }
            after.insert(colliding("new"), at: Int.random(in: 0...after.count, using: &rng))
            var document = Document()
            try document.apply(.apply(sections: [SectionInput(id: "s", items: before.map { Item(id: $0) })]))
            let base = document.snapshot
            try document.apply(.apply(sections: [SectionInput(id: "s", items: after.map { Item(id: $0) })]))
            let changes = document.changeset(since: base)
            try checkStrictly(changes, from: plain(base), to: plain(document.snapshot))
        }
    }

    private func longestIncreasingLength(_ values: [Int]) -> Int {
        var best = [Int](repeating: 1, count: values.count)
        for i in values.indices {
            for j in 0..<i where values[j] < values[i] { best[i] = max(best[i], best[j] + 1) }
        }
        return best.max() ?? 0
    }
}

import DiffcastCore
import DiffcastTestSupport
import Testing

/// Windows (SPEC.md contract 3): the view rule on hand-made states whose expected views were
/// worked out from SPEC.md and confirmed with ../shared/conformance/model.py; anchors passing on;
/// and, over random histories, every tracker against the reference of DiffcastTestSupport.
@Suite struct WindowTests {
    /// A(empty) B[b1 b2] C(empty) D[d1] E(empty): empty sections at the start, between and at the end.
    private func edges() throws -> Document {
        try document([("A", []), ("B", ["b1", "b2"]), ("C", []), ("D", ["d1"]), ("E", [])])
    }

    private func shown(_ tracker: WindowTracker) -> [String] {
        tracker.view.sections.map { section in
            section.id.text + "[" + section.items.map(\.id.text).joined(separator: " ") + "]"
        }
    }

    @Test func emptySectionsAreShownOnlyInsideTheWindowOrAtAnEndItReaches() throws {
        let document = try edges()
        let expected: [(Window, [String], WindowRange)] = [
            (.first(1), ["A[]", "B[b1]"], WindowRange(lower: 0, upper: 1, total: 3)),
            (.first(2), ["A[]", "B[b1 b2]"], WindowRange(lower: 0, upper: 2, total: 3)),
            (.first(3), ["A[]", "B[b1 b2]", "C[]", "D[d1]", "E[]"], WindowRange(lower: 0, upper: 3, total: 3)),
            (.last(1), ["D[d1]", "E[]"], WindowRange(lower: 2, upper: 3, total: 3)),
            (.last(2), ["B[b2]", "C[]", "D[d1]", "E[]"], WindowRange(lower: 1, upper: 3, total: 3)),
            (.anchor("b2", before: 0, after: 0), ["B[b2]"], WindowRange(lower: 1, upper: 2, total: 3)),
            (
                .anchor("b2", before: 0, after: 1), ["B[b2]", "C[]", "D[d1]", "E[]"],
                WindowRange(lower: 1, upper: 3, total: 3)
            ),
            (
                .anchor("d1", before: 5, after: 0), ["A[]", "B[b1 b2]", "C[]", "D[d1]", "E[]"],
                WindowRange(lower: 0, upper: 3, total: 3)
            ),
        ]
        for (window, sections, range) in expected {
            let tracker = try WindowTracker(window, over: document)
            #expect(shown(tracker) == sections, "\(window)")
            #expect(tracker.range == range, "\(window)")
            #expect(document.snapshot.viewDigest(range) == Digest(of: tracker.view), "\(window)")
        }
    }

    /// On sections of thousands of items (many chunks), the view's digest folded from whole
    /// chunks and edge items is the reference digest of the reference view, for ranges that start
    /// and end anywhere, also after writes that left chunks stale.
    @Test func viewDigestsOverManyChunksAreTheReferenceDigestsOfTheViews() throws {
        var document = try document([
            ("A", (0..<1500).map { "a\($0)" }), ("E", []), ("B", (0..<2300).map { "b\($0)" }), ("C", ["c0"]),
        ])
        try document.apply(
            .updateItems((0..<40).map { DataUpdate(id: Identifier("b\($0 * 37)"), data: data("\($0)")) }))
        try document.apply(.insertItems([Item(id: "new")], anchor: .before("a700")))
        _ = document.takeMarks()
        let state = plain(document.snapshot)
        let total = document.itemCount
        var rng = SplitMix64(seed: 11)
        var ranges = [(0, total), (0, 1), (total - 1, total), (1500, 1501), (384, 768), (1501, 3802)]
        for _ in 0..<60 {
            let lower = Int.random(in: 0..<total, using: &rng)
            ranges.append((lower, Int.random(in: lower...min(total, lower + 3000), using: &rng)))
        }
        for (lower, upper) in ranges {
            let range = WindowRange(lower: lower, upper: upper, total: total)
            let expected = ReferenceDigest.of(ReferenceWindow.view(state, lower, upper))
            #expect(document.snapshot.viewDigest(range).description == expected, "\(lower)..<\(upper)")
            #expect(plain(document.snapshot.view(range)) == ReferenceWindow.view(state, lower, upper))
        }
    }

    @Test func anAnchorThatIsNotThereIsUnknown() throws {
        #expect(throws: DiffcastError.unknownItem("ghost")) {
            try WindowTracker(.anchor("ghost", before: 1, after: 1), over: try edges())
        }
    }

    /// The anchor passes to the first survivor after it, else the last before it, else the first
    /// item of the new version; without items it is nil, and the next item to come takes it.
    @Test func aDeletedAnchorPassesOnAsSpecSays() throws {
        var document = try edges()
        var tracker = try WindowTracker(.anchor("b2", before: 1, after: 0), over: document)
        func step(_ write: WriteOperation) throws {
            let previous = document.snapshot
            try document.apply(write)
            let changeset = document.changeset(since: previous)
            _ = tracker.advance(from: previous, to: document, marks: WindowMarks(of: changeset))
        }
        try step(.deleteItems(["b2"]))
        #expect(tracker.anchor == "d1")
        #expect(shown(tracker) == ["A[]", "B[b1]", "C[]", "D[d1]", "E[]"])
        try step(.deleteItems(["d1"]))
        #expect(tracker.anchor == "b1")
        try step(.apply(sections: [SectionInput(id: "X", items: [Item(id: "x1"), Item(id: "x2")])]))
        #expect(tracker.anchor == "x1")
        try step(.deleteAll)
        #expect(tracker.anchor == nil)
        #expect(tracker.range == WindowRange(lower: 0, upper: 0, total: 0))
        try step(.appendSections([SectionInput(id: "Y", items: [Item(id: "y1")])]))
        #expect(tracker.anchor == "y1")
        #expect(shown(tracker) == ["Y[y1]"])
    }

    @Test func aVersionOutsideTheWindowBringsNothing() throws {
        var document = try document([("S", (0..<2000).map { "i\($0)" })])
        var tracker = try WindowTracker(.first(50), over: document)
        func step(_ writes: [WriteOperation]) throws -> (WindowMarks, Changeset?) {
            let previous = document.snapshot
            for write in writes { try document.apply(write) }
            let marks = WindowMarks(of: document.changeset(since: previous), in: document.snapshot)
            return (marks, tracker.advance(from: previous, to: document, marks: marks))
        }
        // Items moved: the view is compared with its digest.
        let (moved, movedResult) = try step([
            .appendItems([Item(id: "tail")], section: nil), .updateItems([DataUpdate(id: "i1500", data: data("1"))]),
        ])
        #expect(moved.touchedPositions == nil && movedResult == nil && tracker.range.total == 2001)
        // Nothing moved: what the version touched is compared with the range.
        let (touched, touchedResult) = try step([
            .updateItems([DataUpdate(id: "i1700", data: data("2"))]), .reloadItems(["i1800"]),
        ])
        #expect(touched.touchedPositions == [1700, 1800] && touchedResult == nil)
        let (_, inside) = try step([.updateItems([DataUpdate(id: "i10", data: data("3"))])])
        #expect(inside?.items.updated == [.init(at: ItemPath(0, 10), id: "i10", data: data("3"))])
    }

    /// Over random histories and random windows: the anchor, range and view every tracker holds
    /// are the reference's; it answers nil exactly when the reference view and marks say nothing
    /// changed; and its changeset takes the old view to the new one under the strict oracle.
    @Test(arguments: 0..<6)
    func trackersFollowTheReferenceOverRandomHistories(seedBlock: Int) throws {
        var rng = SplitMix64(seed: UInt64(seedBlock) &* 104_729 &+ 7)
        var document = Document()
        try document.apply(
            .apply(sections: [SectionInput(id: "s0", items: (0..<12).map { Item(id: Identifier("i\($0)")) })]))
        _ = document.takeMarks()
        let ids = { ReferenceWindow.itemIDs(plain(document.snapshot)) }
        var trackers: [(WindowTracker, ReferenceWindowKind, [UInt8]?)] = []
        for kind in 0..<10 {
            let count = Int.random(in: 1...15, using: &rng)
            switch kind % 3 {
            case 0: trackers.append((try WindowTracker(.first(count), over: document), .first(count), nil))
            case 1: trackers.append((try WindowTracker(.last(count), over: document), .last(count), nil))
            default:
                let anchor = ids()[Int.random(in: 0..<ids().count, using: &rng)]
                let (before, after) = (Int.random(in: 0...4, using: &rng), Int.random(in: 0...4, using: &rng))
                let window = Window.anchor(
                    Identifier(String(decoding: anchor, as: UTF8.self)), before: before, after: after)
                trackers.append(
                    (try WindowTracker(window, over: document), .anchor(before: before, after: after), anchor))
            }
        }
        var events = 0
        for step in 0..<400 {
            let previous = document.snapshot
            var reconfigured = false
            for _ in 0..<Int.random(in: 1...3, using: &rng) {
                let write = randomWrite(document, using: &rng)
                if (try? document.apply(write)) != nil, write.reconfigures { reconfigured = true }
            }
            let changeset = document.changeset(since: previous)
            guard !changeset.isEmpty else { continue }
            // Half the versions with what they touched (the shortcut for versions that move
            // nothing), half without: both ways must agree with the reference.
            let marks =
                step.isMultiple(of: 2)
                ? WindowMarks(of: changeset, in: document.snapshot) : WindowMarks(of: changeset)
            let (old, new) = (plain(previous), plain(document.snapshot))
            for index in trackers.indices {
                var (tracker, kind, anchor) = trackers[index]
                let oldView = plain(tracker.view)
                if case .anchor = kind { anchor = ReferenceWindow.reanchor(anchor, from: old, to: new) }
                let (lower, upper, total) = ReferenceWindow.range(kind, new, anchor: anchor)
                let newView = ReferenceWindow.view(new, lower, upper)
                let result = tracker.advance(from: previous, to: document, marks: marks)
                #expect(tracker.anchor.map(bytes) == anchor, "step \(step), window \(index): anchor")
                #expect(tracker.range == WindowRange(lower: lower, upper: upper, total: total), "step \(step)")
                #expect(plain(tracker.view) == newView, "step \(step), window \(index): view")
                let marked = Self.marked(marks, in: oldView, and: newView)
                #expect((result != nil) == (oldView != newView || marked), "step \(step), window \(index): event")
                if let result {
                    events += 1
                    do {
                        try checkStrictly(result, from: oldView, to: newView, updatesMayRepeatData: reconfigured)
                    } catch {
                        Issue.record("step \(step), window \(index): \(error)")
                    }
                }
                trackers[index] = (tracker, kind, anchor)
            }
        }
        #expect(events > 300, "the histories should change the views often")
    }

    /// Whether a mark of the version names an item or section that is in both views.
    private static func marked(_ marks: WindowMarks, in old: PlainState, and new: PlainState) -> Bool {
        let oldItems = Set(old.flatMap { $0.items.map(\.id) })
        let newItems = Set(new.flatMap { $0.items.map(\.id) })
        let items = marks.reloadedItems.union(marks.updatedItems).map(bytes)
        let sections = marks.reloadedSections.map(bytes)
        return items.contains { oldItems.contains($0) && newItems.contains($0) }
            || sections.contains { id in old.contains { $0.id == id } && new.contains { $0.id == id } }
    }
}

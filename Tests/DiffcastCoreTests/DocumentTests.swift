import DiffcastCore
import DiffcastTestSupport
import Testing

@Suite struct DocumentTests {
    private func outline(_ document: Document) -> [SectionOutline] { document.snapshot.outline }

    @Test func duplicateItemIdentifiersAreRejectedByName() throws {
        var document = try document([("s", ["a"])])
        let before = outline(document)
        #expect(throws: DiffcastError.duplicateIdentifier(kind: .item, id: "a")) {
            try document.apply(.appendItems([Item(id: "a")], section: "s"))
        }
        #expect(throws: DiffcastError.duplicateIdentifier(kind: .item, id: "n")) {
            try document.apply(.appendItems([Item(id: "n"), Item(id: "n")], section: nil))
        }
        #expect(throws: DiffcastError.duplicateIdentifier(kind: .section, id: "s")) {
            try document.apply(.apply(sections: [SectionInput(id: "s"), SectionInput(id: "s")]))
        }
        #expect(throws: DiffcastError.duplicateIdentifier(kind: .item, id: "x")) {
            try document.apply(
                .apply(sections: [
                    SectionInput(id: "s", items: [Item(id: "x")]), SectionInput(id: "t", items: [Item(id: "x")]),
                ]))
        }
        #expect(outline(document) == before)
    }

    /// An `apply` that names an item twice is refused naming it, whether the document it makes
    /// is small (found by comparing, no directory) or not (found by the directory): the
    /// identifier whose second appearance comes first.
    @Test(arguments: [0, 6, 20])
    func anApplyNamesTheRepeatedItemAtAnySize(extraItems: Int) throws {
        var document = try document([("s", ["a"])])
        let before = outline(document)
        let extra = (0..<extraItems).map { Item(id: "e\($0)") }
        #expect(throws: DiffcastError.duplicateIdentifier(kind: .item, id: "b")) {
            try document.apply(
                .apply(sections: [
                    SectionInput(id: "s", items: [Item(id: "a"), Item(id: "b")] + extra),
                    SectionInput(id: "t", items: [Item(id: "b"), Item(id: "a")]),
                ]))
        }
        #expect(throws: DiffcastError.duplicateIdentifier(kind: .item, id: "x")) {
            try document.apply(
                .apply(sections: [SectionInput(id: "s", items: extra + [Item(id: "x"), Item(id: "y"), Item(id: "x")])]))
        }
        #expect(outline(document) == before)
        #expect(document.location(of: "a")! == (0, 0))
    }

    /// A write that takes a small document past 8 items or 8 sections builds its directory; a
    /// batch or transaction that rolls it back takes the directory back too, and the document
    /// keeps finding every item afterwards.
    @Test func aRollBackUndoesTheDirectoryItsWritesBuilt() throws {
        var document = try document([("s", ["a", "b", "c"])])
        let before = outline(document)
        let many = (0..<12).map { Item(id: "n\($0)") }
        #expect(throws: DiffcastError.self) {
            try document.apply(.batch([.appendItems(many, section: "s"), .deleteItems(["ghost"])]))
        }
        #expect(outline(document) == before && document.itemCount == 3)
        document.beginTransaction()
        try document.apply(.appendItems(many, section: "s"))
        try document.apply(.appendSections((0..<10).map { SectionInput(id: "t\($0)") }))
        #expect(document.location(of: "n11")! == (0, 14) && document.itemCount == 15)
        document.rollBackTransaction()
        #expect(outline(document) == before && document.itemCount == 3)
        #expect(!document.containsItem("n0") && document.location(of: "c")! == (0, 2))
        try document.apply(.appendSections((0..<10).map { SectionInput(id: "t\($0)", items: [Item(id: "m\($0)")]) }))
        try document.apply(.moveItem("a", anchor: .after("m9")))
        #expect(document.location(of: "a")! == (10, 1) && document.location(of: "m4")! == (5, 0))
        #expect(document.itemCount == 13)
    }

    @Test func everyOpNamesAnUnknownAnchorOrTarget() throws {
        var document = try document([("A", ["a1"]), ("B", [])])
        let before = outline(document)
        let cases: [(WriteOperation, DiffcastError)] = [
            (.insertSections([SectionInput(id: "Y")], anchor: .before("nope")), .unknownSection("nope")),
            (.deleteSections(["A", "nope"]), .unknownSection("nope")),
            (.moveSection("nope", anchor: .after("A")), .unknownSection("nope")),
            (.moveSection("A", anchor: .after("nope")), .unknownSection("nope")),
            (
                .moveSection("A", anchor: .after("A")),
                .invalidArgument("section 'A' cannot be moved relative to itself")
            ),
            (.reloadSections(["nope"]), .unknownSection("nope")),
            (
                .updateSections([DataUpdate(id: "A", data: nil), DataUpdate(id: "nope", data: nil)]),
                .unknownSection("nope")
            ),
            (.appendItems([Item(id: "z")], section: "nope"), .unknownSection("nope")),
            (.insertItems([Item(id: "z")], anchor: .after("ghost")), .unknownItem("ghost")),
            (.deleteItems(["a1", "ghost"]), .unknownItem("ghost")),
            (.moveItem("ghost", anchor: .before("a1")), .unknownItem("ghost")),
            (.moveItem("a1", anchor: .before("ghost")), .unknownItem("ghost")),
            (.moveItem("a1", anchor: .before("a1")), .invalidArgument("item 'a1' cannot be moved relative to itself")),
            (.reloadItems(["ghost"]), .unknownItem("ghost")),
            (.reconfigureItems(["ghost"]), .unknownItem("ghost")),
            (
                .updateItems([DataUpdate(id: "a1", data: data("1")), DataUpdate(id: "ghost", data: nil)]),
                .unknownItem("ghost")
            ),
        ]
        for (operation, expected) in cases {
            #expect(throws: expected, "\(operation.name)") { try document.apply(operation) }
            #expect(outline(document) == before, "\(operation.name) changed the document")
        }
        #expect(document.takeMarks() == ChangeMarks())
    }

    @Test func appendingItemsNeedsASection() {
        var document = Document()
        #expect(throws: DiffcastError.noSection) { try document.apply(.appendItems([Item(id: "z")], section: nil)) }
        #expect(document.snapshot.sections.isEmpty)
    }

    @Test func aBatchIsAllOrNothing() throws {
        var document = try document([("A", ["a1", "a2"])])
        let before = outline(document)
        #expect(throws: DiffcastError.inBatch(entry: 3, .unknownItem("ghost"))) {
            try document.apply(
                .batch([
                    .appendItems([Item(id: "q1")], section: "A"),
                    .moveItem("q1", anchor: .before("a1")),
                    .reloadItems(["a2"]),
                    .deleteItems(["ghost"]),
                ]))
        }
        #expect(outline(document) == before)
        #expect(!document.containsItem("q1"))
        #expect(document.takeMarks() == ChangeMarks())
        try document.apply(.appendItems([Item(id: "q1")], section: "A"))
        #expect(document.location(of: "q1")! == (0, 2))
    }

    @Test func aTransactionRollsBackEveryWriteAndABatchInsideItKeepsItsOwnRollBack() throws {
        var document = try document([("A", ["a1", "a2"]), ("B", ["b1"])])
        let before = outline(document)
        document.beginTransaction()
        try document.apply(.appendItems([Item(id: "q1"), Item(id: "q2")], section: "B"))
        try document.apply(.moveItem("a1", anchor: .after("b1")))
        #expect(throws: DiffcastError.self) {
            try document.apply(.batch([.deleteItems(["a2"]), .deleteItems(["ghost"])]))
        }
        #expect(document.containsItem("a2"))
        try document.apply(.batch([.deleteItems(["a2"]), .updateItems([.init(id: "q1", data: nil)])]))
        try document.apply(.deleteSections(["A"]))
        try document.apply(.apply(sections: [SectionInput(id: "C", items: [Item(id: "c1"), Item(id: "q1")])]))
        document.rollBackTransaction()
        #expect(outline(document) == before)
        for (id, place) in [("a1", (0, 0)), ("a2", (0, 1)), ("b1", (1, 0))] {
            #expect(document.location(of: Identifier(id))! == place)
        }
        #expect(!document.containsItem("q1") && !document.containsItem("c1"))
        #expect(document.itemCount == 3)
        // Committed writes stay; a rollback after a commit has nothing to undo.
        document.beginTransaction()
        try document.apply(.appendItems([Item(id: "a3")], section: "A"))
        document.commitTransaction()
        document.rollBackTransaction()
        #expect(document.location(of: "a3")! == (0, 2))
    }

    @Test func writesMirrorTheDiffableSnapshotAPI() throws {
        var document = Document()
        try document.apply(
            .appendSections([SectionInput(id: "A", items: [Item(id: "a1"), Item(id: "a2")]), SectionInput(id: "C")]))
        try document.apply(
            .insertSections(
                [SectionInput(id: "B", data: data("\"bee\""), items: [Item(id: "b1")])], anchor: .after("A")))
        try document.apply(.insertItems([Item(id: "a0")], anchor: .before("a1")))
        try document.apply(.appendItems([Item(id: "c1")], section: nil))
        try document.apply(.moveItem("a0", anchor: .after("c1")))
        try document.apply(.moveSection("C", anchor: .before("A")))
        try document.apply(.deleteItems(["a2"]))
        #expect(document.snapshot.sections.map(\.id) == ["C", "A", "B"])
        #expect(itemIDs(document.snapshot) == [["c1", "a0"], ["a1"], ["b1"]])
        #expect(document.location(of: "b1")! == (2, 0))
        try document.apply(.deleteSections(["A"]))
        #expect(!document.containsItem("a1"))
        try document.apply(.deleteAll)
        #expect(document.snapshot.sections.isEmpty && document.itemCount == 0)
    }
}

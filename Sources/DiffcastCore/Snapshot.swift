/// The content of a section or item: canonical compact JSON text, compared as its UTF-8 bytes
/// (two spellings of "é" inside data are two different contents, as for identifiers).
///
/// Absent data and JSON `null` are both represented by `nil` at the use site, never by a
/// `JSONText` holding `null`.
public struct JSONText: Hashable, Sendable, CustomStringConvertible {
    /// Compact JSON text of one value; object keys keep the order they were given in.
    public let text: String

    /// Wraps text that is already canonical compact JSON (the wire parser produces it).
    public init(canonical text: String) {
        self.text = text
    }

    public var description: String { text }

    public static func == (lhs: JSONText, rhs: JSONText) -> Bool {
        UTF8Bytes.equal(lhs.text, rhs.text)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(text.utf8.count)
        for byte in text.utf8 { hasher.combine(byte) }
    }
}

/// One item of a section: identity (`id`) and content (`data`) kept apart. It carries the
/// FNV-1a hash of its digest token, computed when it is made or its data changes, so digests
/// of chunks never re-read item bytes.
public struct Item: Hashable, Sendable {
    public let id: Identifier
    public var data: JSONText? {
        didSet { tokenHash = TokenHash.of(tag: UInt8(ascii: "I"), id: id, data: data) }
    }
    /// FNV-1a of `I` + id + `\n` + data + `\n` (SPEC.md "Digest").
    public private(set) var tokenHash: UInt64

    public init(id: Identifier, data: JSONText? = nil) {
        self.id = id
        self.data = data
        self.tokenHash = TokenHash.of(tag: UInt8(ascii: "I"), id: id, data: data)
    }

    public static func == (lhs: Item, rhs: Item) -> Bool {
        lhs.id == rhs.id && lhs.data == rhs.data
    }

    /// Whether `other`, an item with the same identifier, holds the same data. Their token
    /// hashes cover the data, so where they differ the data does, and neither text is read.
    func hasSameData(as other: Item) -> Bool {
        tokenHash == other.tokenHash && data == other.data
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(id)
        hasher.combine(tokenHash)
    }
}

/// A marker that changes whenever something in a section changes, so that two versions of a
/// section with equal revisions are known to be equal without looking at their items.
public struct Revision: Hashable, Sendable, Comparable {
    public let rawValue: UInt64

    public init(_ rawValue: UInt64) {
        self.rawValue = rawValue
    }

    public static func < (lhs: Revision, rhs: Revision) -> Bool { lhs.rawValue < rhs.rawValue }

    /// Revision 0 belongs to sections built outside a `Document`: it proves nothing.
    public static let unknown = Revision(0)

    /// A revision never handed out before in this process, by any document: two snapshots of
    /// different documents can never be taken for equal sections.
    static func next() -> Revision {
        Revision(ItemList.nextStamp())
    }

    /// Whether two sections with these revisions are known to be equal.
    func provesEqual(to other: Revision) -> Bool {
        self == other && self != .unknown
    }
}

/// One section of a snapshot with its ordered items.
///
/// `structureRevision` changes when the sequence of item identifiers changes;
/// `contentRevision` changes on that and on any item data change. Revisions are handed out by
/// a `Document` and never reused, which lets the differ skip untouched sections.
public struct Section: Sendable {
    public var id: Identifier
    public var data: JSONText?
    public internal(set) var items: ItemList
    public internal(set) var structureRevision: Revision
    public internal(set) var contentRevision: Revision

    public init(id: Identifier, data: JSONText? = nil, items: [Item] = []) {
        self.init(id: id, data: data, items: ItemList(items), revision: .unknown)
    }

    /// FNV-1a of the section's digest token, `S` + id + `\n` + data + `\n`.
    public var tokenHash: UInt64 {
        TokenHash.of(tag: UInt8(ascii: "S"), id: id, data: data)
    }

    init(id: Identifier, data: JSONText?, items: ItemList, revision: Revision) {
        self.id = id
        self.data = data
        self.items = items
        self.structureRevision = revision
        self.contentRevision = revision
    }
}

/// An immutable-by-value picture of a collection: ordered sections, each with ordered items.
///
/// Identifiers are unique: sections among sections, items across the whole snapshot. Copies
/// share storage, so keeping old versions costs only what later versions changed.
public struct Snapshot: Sendable {
    public private(set) var sections: [Section]
    /// Position of every section by identifier when there are more than `scannedSections`;
    /// rebuilt whenever the section order changes. A few sections are found by a scan, so a
    /// small collection holds no table at all.
    private var sectionTable: [Identifier: Int]?
    private static let scannedSections = 8

    public init() {
        sections = []
    }

    /// The position of the section with this identifier, or nil when there is none.
    public func position(ofSection id: Identifier) -> Int? {
        if let sectionTable { return sectionTable[id] }
        return sections.firstIndex { $0.id == id }
    }

    /// A snapshot of the given sections, which must have unique identifiers (use
    /// `Document.apply` for input that may not).
    public init(uncheckedSections sections: [Section]) {
        self.sections = sections
        reindexSections()
    }

    public var itemCount: Int {
        sections.reduce(0) { $0 + $1.items.count }
    }

    /// All identifiers and data as plain values, for tests and for comparing states.
    public var outline: [SectionOutline] {
        sections.map { SectionOutline(id: $0.id, data: $0.data, items: $0.items.flattened) }
    }

    /// Folds again the digests of chunks changed since the last refresh — once per published
    /// version, so that a batch of writes to one chunk folds it once and `Digest(of:)` then
    /// costs a step per chunk. Touches only sections with a changed chunk (no copy of others).
    public mutating func refreshDigests() {
        for index in sections.indices where sections[index].items.hasStaleDigests {
            sections[index].items.refreshDigests()
        }
    }

    mutating func replaceSections(_ newSections: [Section]) {
        sections = newSections
        reindexSections()
    }

    mutating func withSection<Result>(at index: Int, _ body: (inout Section) throws -> Result) rethrows -> Result {
        try body(&sections[index])
    }

    mutating func insertSections(_ newSections: [Section], at index: Int) {
        sections.insert(contentsOf: newSections, at: index)
        reindexSections()
    }

    mutating func removeSections(at indices: [Int]) {
        for index in indices.sorted(by: >) {
            sections.remove(at: index)
        }
        reindexSections()
    }

    mutating func moveSection(from source: Int, to destination: Int) {
        let section = sections.remove(at: source)
        sections.insert(section, at: destination)
        reindexSections()
    }

    private mutating func reindexSections() {
        guard sections.count > Self.scannedSections else {
            sectionTable = nil
            return
        }
        var positions: [Identifier: Int] = [:]
        positions.reserveCapacity(sections.count)
        for (index, section) in sections.enumerated() {
            positions[section.id] = index
        }
        sectionTable = positions
    }
}

/// A section as plain values (identifier, data, items), without revisions: what two snapshots
/// must agree on to be the same state.
public struct SectionOutline: Hashable, Sendable {
    public var id: Identifier
    public var data: JSONText?
    public var items: [Item]

    public init(id: Identifier, data: JSONText? = nil, items: [Item] = []) {
        self.id = id
        self.data = data
        self.items = items
    }
}

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

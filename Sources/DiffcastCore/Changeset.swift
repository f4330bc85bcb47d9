/// A position of an item: section index and item index within it.
public struct ItemPath: Hashable, Sendable, Comparable, CustomStringConvertible {
    public var section: Int
    public var item: Int

    public init(_ section: Int, _ item: Int) {
        self.section = section
        self.item = item
    }

    public static func < (lhs: ItemPath, rhs: ItemPath) -> Bool {
        (lhs.section, lhs.item) < (rhs.section, rhs.item)
    }

    public var description: String { "[\(section),\(item)]" }
}

/// What changed among one kind of element between two versions, in SPEC.md's five lists:
/// sections by index (`SectionChanges`, SPEC.md `changeset.sections`) and items by index path
/// (`ItemChanges`, `changeset.items`). Old positions are in the old version (`deleted`, a move's
/// `from`), the others in the new one.
public struct Changes<Position: Hashable & Sendable & Comparable>: Hashable, Sendable {
    /// An element that went away, at its old position, named so that a subscriber without a
    /// mirror knows which.
    public struct Deletion: Hashable, Sendable {
        public var at: Position
        public var id: Identifier

        @inlinable public init(at: Position, id: Identifier) {
            self.at = at
            self.id = id
        }
    }
    public struct Insertion: Hashable, Sendable {
        public var at: Position
        public var id: Identifier
        public var data: JSONText?

        @inlinable public init(at: Position, id: Identifier, data: JSONText?) {
            self.at = at
            self.id = id
            self.data = data
        }
    }
    public struct Move: Hashable, Sendable {
        public var from: Position
        public var to: Position
        public var id: Identifier

        @inlinable public init(from: Position, to: Position, id: Identifier) {
            self.from = from
            self.to = to
            self.id = id
        }
    }
    public struct Update: Hashable, Sendable {
        public var at: Position
        public var id: Identifier
        public var data: JSONText?

        @inlinable public init(at: Position, id: Identifier, data: JSONText?) {
            self.at = at
            self.id = id
            self.data = data
        }
    }
    public struct Reload: Hashable, Sendable {
        public var at: Position
        public var id: Identifier

        @inlinable public init(at: Position, id: Identifier) {
            self.at = at
            self.id = id
        }
    }

    public var deleted: [Deletion] = []
    public var inserted: [Insertion] = []
    public var moved: [Move] = []
    public var updated: [Update] = []
    public var reloaded: [Reload] = []

    @inlinable public init() {}

    @inlinable public var isEmpty: Bool {
        deleted.isEmpty && inserted.isEmpty && moved.isEmpty && updated.isEmpty && reloaded.isEmpty
    }

    /// Puts every list in SPEC.md's order: `deleted` by old position, the others by new position.
    mutating func sortLists() {
        deleted.sortIfNeeded { $0.at < $1.at }
        inserted.sortIfNeeded { $0.at < $1.at }
        moved.sortIfNeeded { $0.to < $1.to }
        updated.sortIfNeeded { $0.at < $1.at }
        reloaded.sortIfNeeded { $0.at < $1.at }
    }
}

/// What changed among the sections: positions are section indices.
public typealias SectionChanges = Changes<Int>

/// What changed among the items: positions are index paths.
public typealias ItemChanges = Changes<ItemPath>

/// The minimal description of how one version of a collection becomes the next, in UIKit
/// batch-update coordinates; `apply(to:)` is SPEC.md's normative client algorithm.
public struct Changeset: Hashable, Sendable {
    public var sections = SectionChanges()
    public var items = ItemChanges()

    public init() {}

    public var isEmpty: Bool { sections.isEmpty && items.isEmpty }

    /// Puts every list in SPEC.md's order: `deleted` by old position, the others by new position.
    public mutating func sortLists() {
        sections.sortLists()
        items.sortLists()
    }
}

extension Array {
    /// Sorts unless already in order: the differ mostly lists in order (a feed's appends), and
    /// checking is one pass where sorting is several.
    fileprivate mutating func sortIfNeeded(by areInIncreasingOrder: (Element, Element) -> Bool) {
        guard indices.dropFirst().contains(where: { areInIncreasingOrder(self[$0], self[$0 - 1]) }) else { return }
        sort(by: areInIncreasingOrder)
    }
}

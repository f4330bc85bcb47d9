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

/// What changed among the sections between two versions (SPEC.md `changeset.sections`).
/// Old indices are positions in the old version, new indices positions in the new one.
public struct SectionChanges: Hashable, Sendable {
    /// A section that went away, named so that a subscriber without a mirror knows which.
    public struct Deletion: Hashable, Sendable {
        public var index: Int
        public var id: Identifier

        public init(index: Int, id: Identifier) {
            self.index = index
            self.id = id
        }
    }
    public struct Insertion: Hashable, Sendable {
        public var index: Int
        public var id: Identifier
        public var data: JSONText?

        public init(index: Int, id: Identifier, data: JSONText?) {
            self.index = index
            self.id = id
            self.data = data
        }
    }
    public struct Move: Hashable, Sendable {
        public var from: Int
        public var to: Int
        public var id: Identifier

        public init(from: Int, to: Int, id: Identifier) {
            self.from = from
            self.to = to
            self.id = id
        }
    }
    public struct Update: Hashable, Sendable {
        public var index: Int
        public var id: Identifier
        public var data: JSONText?

        public init(index: Int, id: Identifier, data: JSONText?) {
            self.index = index
            self.id = id
            self.data = data
        }
    }
    public struct Reload: Hashable, Sendable {
        public var index: Int
        public var id: Identifier

        public init(index: Int, id: Identifier) {
            self.index = index
            self.id = id
        }
    }

    public var deleted: [Deletion] = []
    public var inserted: [Insertion] = []
    public var moved: [Move] = []
    public var updated: [Update] = []
    public var reloaded: [Reload] = []

    public init() {}

    public var isEmpty: Bool {
        deleted.isEmpty && inserted.isEmpty && moved.isEmpty && updated.isEmpty && reloaded.isEmpty
    }
}

/// What changed among the items between two versions (SPEC.md `changeset.items`).
public struct ItemChanges: Hashable, Sendable {
    /// An item that went away, at its old position, named.
    public struct Deletion: Hashable, Sendable {
        public var at: ItemPath
        public var id: Identifier

        public init(at: ItemPath, id: Identifier) {
            self.at = at
            self.id = id
        }
    }
    public struct Insertion: Hashable, Sendable {
        public var at: ItemPath
        public var id: Identifier
        public var data: JSONText?

        public init(at: ItemPath, id: Identifier, data: JSONText?) {
            self.at = at
            self.id = id
            self.data = data
        }
    }
    public struct Move: Hashable, Sendable {
        public var from: ItemPath
        public var to: ItemPath
        public var id: Identifier

        public init(from: ItemPath, to: ItemPath, id: Identifier) {
            self.from = from
            self.to = to
            self.id = id
        }
    }
    public struct Update: Hashable, Sendable {
        public var at: ItemPath
        public var id: Identifier
        public var data: JSONText?

        public init(at: ItemPath, id: Identifier, data: JSONText?) {
            self.at = at
            self.id = id
            self.data = data
        }
    }
    public struct Reload: Hashable, Sendable {
        public var at: ItemPath
        public var id: Identifier

        public init(at: ItemPath, id: Identifier) {
            self.at = at
            self.id = id
        }
    }

    public var deleted: [Deletion] = []
    public var inserted: [Insertion] = []
    public var moved: [Move] = []
    public var updated: [Update] = []
    public var reloaded: [Reload] = []

    public init() {}

    public var isEmpty: Bool {
        deleted.isEmpty && inserted.isEmpty && moved.isEmpty && updated.isEmpty && reloaded.isEmpty
    }
}

/// The minimal description of how one version of a collection becomes the next, in UIKit
/// batch-update coordinates; `apply(to:)` is SPEC.md's normative client algorithm.
public struct Changeset: Hashable, Sendable {
    public var sections = SectionChanges()
    public var items = ItemChanges()

    public init() {}

    public var isEmpty: Bool { sections.isEmpty && items.isEmpty }

    /// (section moves, item moves): what the "fewest moves" rule counts.
    public var moveCounts: (sections: Int, items: Int) { (sections.moved.count, items.moved.count) }

    /// Puts every list in SPEC.md's order: `deleted` by old position, the others by new position.
    public mutating func sortLists() {
        sections.deleted.sortIfNeeded { $0.index < $1.index }
        sections.inserted.sortIfNeeded { $0.index < $1.index }
        sections.moved.sortIfNeeded { $0.to < $1.to }
        sections.updated.sortIfNeeded { $0.index < $1.index }
        sections.reloaded.sortIfNeeded { $0.index < $1.index }
        items.deleted.sortIfNeeded { $0.at < $1.at }
        items.inserted.sortIfNeeded { $0.at < $1.at }
        items.moved.sortIfNeeded { $0.to < $1.to }
        items.updated.sortIfNeeded { $0.at < $1.at }
        items.reloaded.sortIfNeeded { $0.at < $1.at }
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

/// The part of a collection a subscriber holds instead of all of it (SPEC.md "Windows"): the
/// first or last N items across sections, or an item with up to `before` items before it and
/// up to `after` after it, which follows that item as it moves.
public enum Window: Hashable, Sendable {
    case first(Int)
    case last(Int)
    case anchor(Identifier, before: Int, after: Int)

    /// The item an anchor window was asked for.
    public var anchor: Identifier? {
        if case .anchor(let id, _, _) = self { return id }
        return nil
    }
}

/// The positions `lower..<upper` that a window selects among a version's `total` items (the
/// `offset`, `count` and `total` of a windowed event).
public struct WindowRange: Hashable, Sendable {
    public var lower: Int
    public var upper: Int
    public var total: Int

    public init(lower: Int, upper: Int, total: Int) {
        self.lower = lower
        self.upper = upper
        self.total = total
    }

    public var count: Int { upper - lower }
}

extension Snapshot {
    /// The number of items in the sections before `section`: a step per section, never per item.
    public func itemsBefore(section: Int) -> Int {
        var count = 0
        for index in 0..<min(section, sections.count) { count += sections[index].items.count }
        return count
    }

    /// An item's position in the collection's order across sections.
    public func flatPosition(of path: ItemPath) -> Int {
        itemsBefore(section: path.section) + path.item
    }

    /// The item at a position in the order across sections (0..<itemCount).
    func item(atFlatPosition position: Int) -> Item? {
        var start = 0
        for section in sections {
            if position < start + section.items.count { return section.items[position - start] }
            start += section.items.count
        }
        return nil
    }

    /// The view of `range` (SPEC.md "The view"): every section with an item in it, with its
    /// data and exactly those items, and every empty section whose place k (items before it)
    /// has lower < k < upper, or k = lower = 0, or k = upper = total.
    public func view(_ range: WindowRange) -> Snapshot {
        var shown: [Section] = []
        forEachSection(in: range) { section, items in
            var part: [Item] = []
            if !items.isEmpty {
                part.reserveCapacity(items.count)
                var cursor = ItemList.Cursor(section.items, at: items.lowerBound)
                while cursor.position < items.upperBound {
                    part.append(cursor.item)
                    cursor.advance()
                }
            }
            shown.append(Section(id: section.id, data: section.data, items: part))
        }
        return Snapshot(uncheckedSections: shown)
    }

    /// The digest of `view(range)` without building it: whole chunks inside the range
    /// contribute their cached digests, the chunks at its edges their items' token hashes.
    public func viewDigest(_ range: WindowRange) -> Digest {
        var part = DigestPart.empty
        forEachSection(in: range) { section, items in
            part.append(tokenHash: section.tokenHash)
            guard !items.isEmpty else { return }
            let list = section.items
            var (chunk, offset) = list.locate(items.lowerBound)
            var position = items.lowerBound
            while position < items.upperBound {
                let current = list.chunks[chunk]
                let take = min(current.items.count - offset, items.upperBound - position)
                if offset == 0 && take == current.items.count {
                    part.append(current.digest)
                } else {
                    for index in offset..<(offset + take) { part.append(tokenHash: current.items[index].tokenHash) }
                }
                position += take
                chunk += 1
                offset = 0
            }
        }
        return Digest(value: part.value)
    }

    /// Calls `body` with every section the view of `range` shows and the positions of its
    /// items (within the section) that the view holds.
    private func forEachSection(in range: WindowRange, _ body: (Section, Range<Int>) -> Void) {
        var placeOfSection = 0
        for section in sections {
            let count = section.items.count
            if count > 0 {
                let lower = max(range.lower - placeOfSection, 0)
                let upper = min(range.upper - placeOfSection, count)
                if lower < upper { body(section, lower..<upper) }
            } else if (range.lower < placeOfSection && placeOfSection < range.upper)
                || (placeOfSection == range.lower && range.lower == 0)
                || (placeOfSection == range.upper && range.upper == range.total)
            {
                body(section, 0..<0)
            }
            placeOfSection += count
            if placeOfSection > range.upper { break }
        }
    }
}

/// What a version asked to be listed beyond what a diff of views finds: the `reloaded` and
/// `updated` items and the `reloaded` sections of its whole changeset. A windowed changeset
/// lists them for the items and sections that are in both views.
public struct WindowMarks: Sendable {
    public var reloadedItems: Set<Identifier> = []
    public var updatedItems: Set<Identifier> = []
    public var reloadedSections: Set<Identifier> = []
    /// When the version inserted, deleted and moved nothing (only data and marks changed): the
    /// positions of the items it updated or reloaded, and the sections it updated or reloaded.
    /// A window that holds none of them is known unchanged without looking at its view.
    public var touchedPositions: [Int]?
    public var touchedSections: Set<Identifier> = []

    public init() {}

    /// The marks of a version's whole changeset; with `snapshot` (the version's state), also
    /// what it touched when it moved nothing.
    public init(of changeset: Changeset, in snapshot: Snapshot? = nil) {
        reloadedItems = Set(changeset.items.reloaded.map(\.id))
        updatedItems = Set(changeset.items.updated.map(\.id))
        reloadedSections = Set(changeset.sections.reloaded.map(\.id))
        let sections = changeset.sections
        let items = changeset.items
        guard let snapshot, sections.inserted.isEmpty, sections.deleted.isEmpty, sections.moved.isEmpty,
            items.inserted.isEmpty, items.deleted.isEmpty, items.moved.isEmpty
        else { return }
        touchedPositions = (items.updated.map(\.at) + items.reloaded.map(\.at)).map(snapshot.flatPosition)
        touchedSections = Set(sections.updated.map(\.id)).union(reloadedSections)
    }

    public var isEmpty: Bool { reloadedItems.isEmpty && updatedItems.isEmpty && reloadedSections.isEmpty }
}

/// One window over a collection's published versions: its anchor, its range and the view it
/// shows. `advance` is called with every published version and says what a subscriber of the
/// window is sent (nothing when the view stayed as it was); one tracker serves every subscriber
/// with the same window.
///
/// Its cost per version is the window's, not the collection's: the anchor is found through the
/// document's directory, the range from section counts, and an unchanged view is recognized by
/// its digest, folded from the items' cached token hashes (and whole chunks' digests).
public struct WindowTracker: Sendable {
    public let window: Window
    /// The anchor now (anchor windows; nil while the collection has no items).
    public private(set) var anchor: Identifier?
    /// The anchor's position in the version last seen, where a deleted anchor's successor is looked for.
    private var anchorPosition = 0
    public private(set) var range: WindowRange
    /// What a subscriber of this window holds.
    public private(set) var view: Snapshot
    private var viewDigest: Digest

    /// The window over `document` as it is; an anchor that is not in it is `unknown_item`.
    public init(_ window: Window, over document: Document) throws(DiffcastError) {
        self.window = window
        if case .anchor(let id, _, _) = window {
            guard let location = document.location(of: id) else { throw .unknownItem(id) }
            anchor = id
            anchorPosition = document.snapshot.flatPosition(of: ItemPath(location.section, location.item))
        }
        range = WindowRange(lower: 0, upper: 0, total: 0)
        view = Snapshot()
        viewDigest = Digest(value: 0)
        range = currentRange(itemCount: document.itemCount)
        view = document.snapshot.view(range)
        viewDigest = document.snapshot.viewDigest(range)
    }

    /// Moves on to the next published version, `document`, whose previous version was
    /// `previous`. Returns the changeset from the old view to the new one with the version's
    /// marks on what is in both, or nil when the view did not change.
    ///
    /// - Complexity: O(1) when the version touched nothing at or before the window (a position
    ///   check); otherwise O(window size) to take the view and its digest.
    public mutating func advance(from previous: Snapshot, to document: Document, marks: WindowMarks) -> Changeset? {
        if let touched = marks.touchedPositions {
            // Nothing moved: the anchor, the range and the sections shown are as they were.
            let inside = touched.contains { range.lower <= $0 && $0 < range.upper }
            if !inside && !marks.touchedSections.contains(where: { view.position(ofSection: $0) != nil }) {
                return nil
            }
        }
        if case .anchor = window { followAnchor(from: previous, to: document) }
        let newRange = currentRange(itemCount: document.itemCount)
        let snapshot = document.snapshot
        let newDigest = snapshot.viewDigest(newRange)
        range = newRange
        guard newDigest != viewDigest || marksMayTouch(marks, document, newRange) else { return nil }
        let newView = snapshot.view(newRange)
        let changeset = Self.changeset(from: view, to: newView, marks: marks)
        view = newView
        viewDigest = newDigest
        return changeset.isEmpty ? nil : changeset
    }

    /// The changeset a windowed subscriber gets from `old` to `new` (views): the one of two
    /// versions, plus `marks` on the items and sections that are in both.
    public static func changeset(from old: Snapshot, to new: Snapshot, marks: WindowMarks = WindowMarks()) -> Changeset
    {
        var changeset = Differ.changeset(from: old, to: new)
        guard !marks.isEmpty else { return changeset }
        var oldItems = Set<Identifier>()
        for section in old.sections {
            for item in section.items { oldItems.insert(item.id) }
        }
        let listedUpdates = Set(changeset.items.updated.map(\.id))
        for (sectionIndex, section) in new.sections.enumerated() {
            if marks.reloadedSections.contains(section.id), old.position(ofSection: section.id) != nil {
                changeset.sections.reloaded.append(.init(at: sectionIndex, id: section.id))
            }
            for (itemIndex, item) in section.items.enumerated() where oldItems.contains(item.id) {
                let path = ItemPath(sectionIndex, itemIndex)
                if marks.reloadedItems.contains(item.id) {
                    changeset.items.reloaded.append(.init(at: path, id: item.id))
                }
                if marks.updatedItems.contains(item.id), !listedUpdates.contains(item.id) {
                    changeset.items.updated.append(.init(at: path, id: item.id, data: item.data))
                }
            }
        }
        changeset.sortLists()
        return changeset
    }

    /// Whether a version's marks may name something in both views (then the views are diffed
    /// even though their digests are equal): a marked section in the old view, or a marked item
    /// in the new range.
    private func marksMayTouch(_ marks: WindowMarks, _ document: Document, _ newRange: WindowRange) -> Bool {
        guard !marks.isEmpty else { return false }
        if marks.reloadedSections.contains(where: { view.position(ofSection: $0) != nil }) { return true }
        for id in marks.reloadedItems.union(marks.updatedItems) {
            guard let location = document.location(of: id) else { continue }
            let position = document.snapshot.flatPosition(of: ItemPath(location.section, location.item))
            if newRange.lower <= position && position < newRange.upper { return true }
        }
        return false
    }

    /// The range the window selects now.
    private func currentRange(itemCount total: Int) -> WindowRange {
        switch window {
        case .first(let count):
            return WindowRange(lower: 0, upper: min(count, total), total: total)
        case .last(let count):
            return WindowRange(lower: max(0, total - count), upper: total, total: total)
        case .anchor(_, let before, let after):
            guard anchor != nil else { return WindowRange(lower: 0, upper: 0, total: total) }
            return WindowRange(
                lower: max(0, anchorPosition - before), upper: min(total, anchorPosition + after + 1), total: total)
        }
    }

    /// SPEC.md "Anchors move": the anchor stays on its item while it is in the collection; a
    /// deleted anchor passes to the first item after it in the previous version that survived,
    /// else the last one before it that survived, else the new version's first item.
    private mutating func followAnchor(from previous: Snapshot, to document: Document) {
        if let current = anchor, let location = document.location(of: current) {
            anchorPosition = document.snapshot.flatPosition(of: ItemPath(location.section, location.item))
            return
        }
        var successor: Identifier?
        if anchor != nil {
            successor =
                previous.firstSurvivor(after: anchorPosition, in: document)
                ?? previous.lastSurvivor(before: anchorPosition, in: document)
        }
        if successor == nil, document.itemCount > 0 {
            successor = document.snapshot.item(atFlatPosition: 0)?.id
        }
        anchor = successor
        if let successor, let location = document.location(of: successor) {
            anchorPosition = document.snapshot.flatPosition(of: ItemPath(location.section, location.item))
        } else {
            anchor = nil
            anchorPosition = 0
        }
    }
}

extension Snapshot {
    /// The first item after `position` that `document` still holds.
    fileprivate func firstSurvivor(after position: Int, in document: Document) -> Identifier? {
        var start = 0
        for section in sections {
            let count = section.items.count
            defer { start += count }
            guard position + 1 < start + count else { continue }
            var cursor = ItemList.Cursor(section.items, at: max(position + 1 - start, 0))
            while !cursor.atEnd {
                if document.containsItem(cursor.id) { return cursor.id }
                cursor.advance()
            }
        }
        return nil
    }

    /// The last item before `position` that `document` still holds.
    fileprivate func lastSurvivor(before position: Int, in document: Document) -> Identifier? {
        var end = itemCount
        for section in sections.reversed() {
            let count = section.items.count
            let start = end - count
            defer { end = start }
            guard start < position else { continue }
            var index = min(position, end) - start - 1
            while index >= 0 {
                let id = section.items[index].id
                if document.containsItem(id) { return id }
                index -= 1
            }
        }
        return nil
    }
}

/// Where a window stands at a version: the `window` object of a windowed event or `get`.
public struct WindowPlace: Hashable, Sendable {
    public var range: WindowRange
    /// Whether the window is an anchor window, whose object names its anchor (or `null`).
    public var isAnchored: Bool
    public var anchor: Identifier?

    public init(range: WindowRange, isAnchored: Bool, anchor: Identifier?) {
        self.range = range
        self.isAnchored = isAnchored
        self.anchor = anchor
    }
}

extension WindowTracker {
    /// The window's place at the version last seen.
    public var place: WindowPlace {
        WindowPlace(range: range, isAnchored: window.anchor != nil, anchor: anchor)
    }

    /// The window as a request would name it now (an anchor window by its current anchor):
    /// two trackers with the same key show the same views from now on.
    public var key: Window {
        guard case .anchor(_, let before, let after) = window, let anchor else { return window }
        return .anchor(anchor, before: before, after: after)
    }
}

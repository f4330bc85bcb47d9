import DiffcastCore
import DiffcastWire

/// The windows subscribers hold on one collection, as the apply queue keeps them: one tracker
/// per distinct window, shared by all its subscribers (a thousand browsers on the head of a feed
/// are one view, computed and encoded once per version), and which group each connection is in.
struct WindowGroups {
    /// One distinct window and how many subscriptions hold it.
    struct Group {
        var tracker: WindowTracker
        var members: Int
    }

    /// The tables, in one box copied on write (`Saved` keeps a copy), made by the first
    /// windowed subscriber and dropped with the last: most collections have none, and hold 8
    /// bytes for them rather than 24.
    private final class Tables {
        var groups: [WindowGroupID: Group] = [:]
        /// The group showing each window, by the window as a request would name it now.
        var byKey: [Window: WindowGroupID] = [:]
        /// The group of each connection's windowed subscription.
        var memberships: [ConnectionID: WindowGroupID] = [:]

        init() {}

        init(copying other: Tables) {
            groups = other.groups
            byKey = other.byKey
            memberships = other.memberships
        }
    }

    private var tables: Tables?

    /// The tables, this value's alone.
    private mutating func writable() -> Tables {
        if isKnownUniquelyReferenced(&tables), let tables { return tables }
        let own = tables.map(Tables.init(copying:)) ?? Tables()
        tables = own
        return own
    }

    var isEmpty: Bool { tables?.groups.isEmpty ?? true }

    func group(of connection: ConnectionID) -> WindowGroupID? { tables?.memberships[connection] }

    func tracker(_ id: WindowGroupID) -> WindowTracker? { tables?.groups[id]?.tracker }

    /// Puts `connection` in the group showing `tracker`'s window (made when there is none) and
    /// takes it out of the group it was in. Returns the group and its tracker.
    mutating func join(
        _ connection: ConnectionID, _ tracker: WindowTracker, nextID: () -> WindowGroupID
    ) -> (WindowGroupID, WindowTracker) {
        leave(connection)
        let tables = writable()
        let id: WindowGroupID
        if let existing = tables.byKey[tracker.key], tables.groups[existing] != nil {
            id = existing
        } else {
            id = nextID()
            tables.groups[id] = Group(tracker: tracker, members: 0)
            tables.byKey[tracker.key] = id
        }
        tables.groups[id]?.members += 1
        tables.memberships[connection] = id
        return (id, tables.groups[id]?.tracker ?? tracker)
    }

    /// Ends `connection`'s windowed subscription, if it has one; an emptied group is forgotten,
    /// and the tables with the last one.
    mutating func leave(_ connection: ConnectionID) {
        guard group(of: connection) != nil else { return }
        let tables = writable()
        guard let id = tables.memberships.removeValue(forKey: connection), var group = tables.groups[id] else { return }
        group.members -= 1
        if group.members > 0 {
            tables.groups[id] = group
            return
        }
        tables.groups[id] = nil
        if tables.byKey[group.tracker.key] == id { tables.byKey[group.tracker.key] = nil }
        if tables.groups.isEmpty { self.tables = nil }
    }

    /// Moves every window on to a newly published version; returns the changesets of the
    /// windows whose view changed. Anchor windows whose anchor moved are filed under their new
    /// key, so that a subscriber asking for the same window later shares their computation.
    mutating func advance(
        from previous: Snapshot, to document: Document, marks: WindowMarks
    ) -> [(WindowGroupID, WindowTracker, Changeset)] {
        guard !isEmpty else { return [] }
        let tables = writable()
        var changed: [(WindowGroupID, WindowTracker, Changeset)] = []
        for id in Array(tables.groups.keys) {
            guard var group = tables.groups[id] else { continue }
            let oldKey = group.tracker.key
            let changeset = group.tracker.advance(from: previous, to: document, marks: marks)
            tables.groups[id] = group
            if let changeset { changed.append((id, group.tracker, changeset)) }
            let newKey = group.tracker.key
            if newKey != oldKey {
                if tables.byKey[oldKey] == id { tables.byKey[oldKey] = nil }
                if tables.byKey[newKey] == nil { tables.byKey[newKey] = id }
            }
        }
        return changed
    }
}

/// Names a group of subscribers sharing one window, unique in the daemon.
public typealias WindowGroupID = UInt64

/// A windowed subscription's group and the range of the view it was sent.
public struct WindowJoin: Sendable {
    public var group: WindowGroupID
    public var range: WindowRange
}

/// What a window's subscribers are sent for a version that changed their view.
public struct WindowDelivery: Sendable {
    public var group: WindowGroupID
    public var event: WindowEvent
    public var range: WindowRange
}

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

    private(set) var groups: [WindowGroupID: Group] = [:]
    /// The group showing each window, by the window as a request would name it now.
    private var byKey: [Window: WindowGroupID] = [:]
    /// The group of each connection's windowed subscription.
    private var memberships: [ConnectionID: WindowGroupID] = [:]

    var isEmpty: Bool { groups.isEmpty }

    func group(of connection: ConnectionID) -> WindowGroupID? { memberships[connection] }

    func tracker(_ id: WindowGroupID) -> WindowTracker? { groups[id]?.tracker }

    /// Puts `connection` in the group showing `tracker`'s window (made when there is none) and
    /// takes it out of the group it was in. Returns the group and its tracker.
    mutating func join(
        _ connection: ConnectionID, _ tracker: WindowTracker, nextID: () -> WindowGroupID
    ) -> (WindowGroupID, WindowTracker) {
        leave(connection)
        let id: WindowGroupID
        if let existing = byKey[tracker.key], groups[existing] != nil {
            id = existing
        } else {
            id = nextID()
            groups[id] = Group(tracker: tracker, members: 0)
            byKey[tracker.key] = id
        }
        groups[id]?.members += 1
        memberships[connection] = id
        return (id, groups[id]?.tracker ?? tracker)
    }

    /// Ends `connection`'s windowed subscription, if it has one; an emptied group is forgotten.
    mutating func leave(_ connection: ConnectionID) {
        guard let id = memberships.removeValue(forKey: connection), var group = groups[id] else { return }
        group.members -= 1
        if group.members > 0 {
            groups[id] = group
            return
        }
        groups[id] = nil
        if byKey[group.tracker.key] == id { byKey[group.tracker.key] = nil }
    }

    /// Moves every window on to a newly published version; returns the changesets of the
    /// windows whose view changed. Anchor windows whose anchor moved are filed under their new
    /// key, so that a subscriber asking for the same window later shares their computation.
    mutating func advance(
        from previous: Snapshot, to document: Document, marks: WindowMarks
    ) -> [(WindowGroupID, WindowTracker, Changeset)] {
        var changed: [(WindowGroupID, WindowTracker, Changeset)] = []
        for id in Array(groups.keys) {
            guard var group = groups[id] else { continue }
            let oldKey = group.tracker.key
            let changeset = group.tracker.advance(from: previous, to: document, marks: marks)
            groups[id] = group
            if let changeset { changed.append((id, group.tracker, changeset)) }
            let newKey = group.tracker.key
            if newKey != oldKey {
                if byKey[oldKey] == id { byKey[oldKey] = nil }
                if byKey[newKey] == nil { byKey[newKey] = id }
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

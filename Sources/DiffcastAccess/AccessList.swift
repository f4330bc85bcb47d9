import Glibc

/// Peers allowed by their credentials (`SO_PEERCRED`): user ids, group ids, user and group names.
public struct AccessList: Sendable, Equatable {
    public var userIDs: Set<UInt32> = []
    public var groupIDs: Set<UInt32> = []

    public init() {}

    /// Parses `uid:1000`, `gid:27`, `user:alice`, `group:staff`, comma-separated.
    public init(parsing text: String) throws(AccessListError) {
        for entry in text.split(separator: ",").map({ $0.trimmingWhitespace() }) where !entry.isEmpty {
            let parts = entry.split(separator: ":", maxSplits: 1).map(String.init)
            guard parts.count == 2 else { throw AccessListError(entry: entry) }
            switch parts[0] {
            case "uid":
                guard let id = UInt32(parts[1]) else { throw AccessListError(entry: entry) }
                userIDs.insert(id)
            case "gid":
                guard let id = UInt32(parts[1]) else { throw AccessListError(entry: entry) }
                groupIDs.insert(id)
            case "user":
                guard let id = getpwnam(parts[1]).map({ $0.pointee.pw_uid }) else {
                    throw AccessListError(entry: entry)
                }
                userIDs.insert(id)
            case "group":
                guard let id = getgrnam(parts[1]).map({ $0.pointee.gr_gid }) else {
                    throw AccessListError(entry: entry)
                }
                groupIDs.insert(id)
            default:
                throw AccessListError(entry: entry)
            }
        }
    }

    public var allowsEveryone: Bool { userIDs.isEmpty && groupIDs.isEmpty }

    /// Whether a peer with these credentials may: root always may, and so does anyone when the
    /// list is empty. The peer's groups are asked for only when the list names a group and its
    /// user is not let in already: they are a lookup in the group database.
    public func allows(userID: UInt32, groupIDs peerGroups: () -> Set<UInt32>) -> Bool {
        if allowsEveryone || userID == 0 || userIDs.contains(userID) { return true }
        return !groupIDs.isEmpty && !groupIDs.isDisjoint(with: peerGroups())
    }
}

/// An access-list entry that is neither `uid:N`, `gid:N`, `user:NAME` nor `group:NAME` of a
/// known user or group.
public struct AccessListError: Error, CustomStringConvertible {
    public let entry: String
    public var description: String {
        "bad access-list entry '\(entry)': expected uid:N, gid:N, user:NAME or group:NAME of an existing user or group"
    }
}

extension StringProtocol {
    /// The text without the spaces that start and end it (an entry of a comma-separated list).
    package func trimmingWhitespace() -> String {
        guard let first = firstIndex(where: { $0 != " " }), let last = lastIndex(where: { $0 != " " }) else {
            return ""
        }
        return String(self[first...last])
    }
}

import CLibUV
import CSystem
import Glibc

/// Who is at the other end of a Unix socket, as the kernel says (`SO_PEERCRED`).
struct PeerCredentials: Sendable, Hashable {
    var userID: UInt32
    /// The primary group the peer's process runs with.
    var groupID: UInt32

    /// The credentials of a connected Unix stream, or nil for other streams.
    init?(stream: UnsafeMutableRawPointer) {
        var descriptor: uv_os_fd_t = -1
        guard uv_fileno(dc_handle(stream), &descriptor) == 0 else { return nil }
        var user: uid_t = 0
        var group: gid_t = 0
        guard dc_peer_credentials(descriptor, &user, &group) == 0 else { return nil }
        userID = user
        groupID = group
    }

    /// The primary group and the user's supplementary groups, as the group database says now.
    /// Looked up only when an access list names groups (`AccessList.allows`), when the peer
    /// connects and at each reload (through `PeerGroupLookups`): a connection keeps no copy, so
    /// thousands of subscribers cost no set each, and a reload sees the groups as they are then.
    func groupIDs() -> Set<UInt32> {
        var groupIDs: Set<UInt32> = [groupID]
        guard let account = getpwuid(userID) else { return groupIDs }
        var count: Int32 = 64
        var groups = [gid_t](repeating: 0, count: Int(count))
        if getgrouplist(account.pointee.pw_name, groupID, &groups, &count) < 0, count > Int32(groups.count) {
            // More groups than room: `count` now says how many.
            groups = [gid_t](repeating: 0, count: Int(count))
            guard getgrouplist(account.pointee.pw_name, groupID, &groups, &count) >= 0 else { return groupIDs }
        }
        groupIDs.formUnion(groups.prefix(Int(max(0, min(count, Int32(groups.count))))))
        return groupIDs
    }
}

/// Peers' groups, each read from the group database once per user and group for as long as the
/// value lives: across both access lists when one peer connects, across every connection at a
/// reload (which would otherwise hold the loop for a lookup per connection).
struct PeerGroupLookups {
    private var found: [PeerCredentials: Set<UInt32>] = [:]

    mutating func groups(of peer: PeerCredentials) -> Set<UInt32> {
        if let known = found[peer] { return known }
        let groups = peer.groupIDs()
        found[peer] = groups
        return groups
    }
}

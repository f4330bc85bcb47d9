import CLibUV
import CSystem
import Glibc

/// Who is at the other end of a Unix socket, as the kernel says (`SO_PEERCRED`), with the
/// supplementary groups of that user.
struct PeerCredentials: Sendable, Equatable {
    var userID: UInt32
    var groupIDs: Set<UInt32>

    /// The credentials of a connected Unix stream, or nil for other streams.
    init?(stream: UnsafeMutableRawPointer) {
        var descriptor: uv_os_fd_t = -1
        guard uv_fileno(dc_handle(stream), &descriptor) == 0 else { return nil }
        var user: uid_t = 0
        var group: gid_t = 0
        guard dc_peer_credentials(descriptor, &user, &group) == 0 else { return nil }
        userID = user
        groupIDs = [group]
        if let account = getpwuid(user) {
            var count: Int32 = 64
            var groups = [gid_t](repeating: 0, count: Int(count))
            if getgrouplist(account.pointee.pw_name, group, &groups, &count) >= 0 {
                groupIDs.formUnion(groups.prefix(Int(count)))
            }
        }
    }
}

import CLibUV
import Glibc

/// A socket address as the kernel and libuv read it: a `sockaddr_storage` and the length of what
/// it holds. The one place the server reads an address's memory as another type (`sockaddr_in`,
/// `sockaddr_in6`, `sockaddr_un`, `sockaddr`); the listeners, the peer names in logs and the
/// notify socket make and read addresses through it.
struct SocketAddress {
    private var storage = sockaddr_storage()
    /// Bytes of `storage` the address takes.
    private(set) var length = socklen_t(MemoryLayout<sockaddr_storage>.size)

    private init() {}

    /// An IPv4 or IPv6 literal and a port; nil when `host` is neither.
    init?(host: String, port: Int32) {
        let parsed = withUnsafeMutablePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { uv_ip4_addr(host, port, $0) } == 0
                || pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { uv_ip6_addr(host, port, $0) } == 0
        }
        guard parsed else { return nil }
        length = socklen_t(
            Int32(storage.ss_family) == AF_INET6 ? MemoryLayout<sockaddr_in6>.size : MemoryLayout<sockaddr_in>.size)
        checkInvariants()
    }

    /// A Unix socket's path; a leading `@` names the abstract namespace (a NUL byte on the
    /// wire). A path longer than `sun_path` is cut to fit.
    init(unixPath path: String) {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var pathBytes = Array(path.utf8)
        if pathBytes.first == UInt8(ascii: "@") { pathBytes[0] = 0 }
        let count = withUnsafeMutableBytes(of: &address.sun_path) { raw -> Int in
            let count = min(pathBytes.count, raw.count - 1)
            raw.copyBytes(from: pathBytes.prefix(count))
            return count
        }
        withUnsafeMutableBytes(of: &storage) { raw in
            withUnsafeBytes(of: &address) { raw.copyMemory(from: $0) }
        }
        length = socklen_t(MemoryLayout<sa_family_t>.size + count)
        checkInvariants()
    }

    /// The address a socket is bound to; nil when `getsockname` fails.
    init?(boundTo descriptor: Int32) {
        self.init()
        let result = withUnsafeMutablePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        guard result == 0 else { return nil }
        checkInvariants()
    }

    /// The peer of a connected TCP handle; nil when libuv cannot tell.
    init?(peerOf handle: UnsafeMutablePointer<uv_tcp_t>) {
        self.init()
        var size = Int32(length)
        let result = withUnsafeMutablePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { uv_tcp_getpeername(handle, $0, &size) }
        }
        guard result == 0 else { return nil }
        length = socklen_t(size)
        checkInvariants()
    }

    var isUnix: Bool { Int32(storage.ss_family) == AF_UNIX }

    /// A Unix socket's path (empty for an unnamed or abstract one); nil for another family.
    var unixPath: String? {
        guard isUnix else { return nil }
        return withUnsafeBytes(of: storage) { raw in
            // sockaddr_un: the family, then the NUL-terminated path.
            String(
                decoding: raw.dropFirst(MemoryLayout<sa_family_t>.size).prefix(Int(length)).prefix { $0 != 0 },
                as: UTF8.self)
        }
    }

    /// `IP:PORT` of an IPv4 or IPv6 address (the IPv6 one unbracketed, as logs have it); nil for
    /// another family.
    var hostAndPort: String? {
        var name = [CChar](repeating: 0, count: 64)
        let port: UInt16
        switch Int32(storage.ss_family) {
        case AF_INET6:
            port = withUnsafePointer(to: storage) {
                $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { address in
                    uv_ip6_name(address, &name, name.count)
                    return UInt16(bigEndian: address.pointee.sin6_port)
                }
            }
        case AF_INET:
            port = withUnsafePointer(to: storage) {
                $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { address in
                    uv_ip4_name(address, &name, name.count)
                    return UInt16(bigEndian: address.pointee.sin_port)
                }
            }
        default:
            return nil
        }
        let host = String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return "\(host):\(port)"
    }

    /// Calls `body` with the address as the `sockaddr` that `bind`, `sendto` and libuv take.
    func withSockaddr<Result>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> Result) -> Result {
        withUnsafePointer(to: storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, length) }
        }
    }

    /// Checks what the memory reads rely on, in debug builds (`DIFFCAST_INTERNAL_CHECKS`): the
    /// length fits the storage.
    private func checkInvariants() {
        #if DIFFCAST_INTERNAL_CHECKS
            precondition(Int(length) <= MemoryLayout<sockaddr_storage>.size, "address longer than its storage")
        #endif
    }
}

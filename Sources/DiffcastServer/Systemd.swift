import CLibUV
import CSystem
import Glibc

/// The parts of systemd's service protocol the daemon speaks, without libsystemd: readiness and
/// status datagrams to `$NOTIFY_SOCKET`, the watchdog, and sockets passed in by socket activation.
public struct SystemdIntegration: Sendable {
    /// `$NOTIFY_SOCKET`, if systemd (or a test) is listening for notifications.
    let notifySocketPath: String?
    /// Half of `$WATCHDOG_USEC`, when the service has a watchdog.
    public let watchdogIntervalMilliseconds: UInt64?

    public init(environment: [String: String]) {
        notifySocketPath = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
        watchdogIntervalMilliseconds = environment["WATCHDOG_USEC"].flatMap(UInt64.init).map { max($0 / 2000, 1) }
    }

    public var isSupervised: Bool { notifySocketPath != nil }

    /// Sends one notification (`READY=1`, `STATUS=…`, `STOPPING=1`, `WATCHDOG=1`); silent when
    /// nobody listens, since a notification is never worth failing for.
    public func notify(_ message: String) {
        guard let path = notifySocketPath else { return }
        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return }
        defer { close(descriptor) }
        // A leading '@' names the abstract namespace (SocketAddress).
        let address = SocketAddress(unixPath: path)
        _ = message.withCString { text in
            address.withSockaddr { address, length in
                sendto(descriptor, text, strlen(text), Int32(MSG_NOSIGNAL), address, length)
            }
        }
    }

    /// Listening sockets passed by socket activation (`LISTEN_PID`, `LISTEN_FDS`), taken once:
    /// the variables are removed so that children do not take them too.
    public static func takeInheritedListeners() -> [Int32] {
        defer {
            unsetenv("LISTEN_PID")
            unsetenv("LISTEN_FDS")
            unsetenv("LISTEN_FDNAMES")
        }
        guard let pidText = getenv("LISTEN_PID").map({ String(cString: $0) }), pid_t(pidText) == getpid(),
            let countText = getenv("LISTEN_FDS").map({ String(cString: $0) }), let count = Int32(countText), count > 0
        else { return [] }
        let first: Int32 = 3
        return (first..<(first + count)).map { descriptor in
            _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
            return descriptor
        }
    }
}

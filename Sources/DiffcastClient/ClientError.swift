#if canImport(Glibc)
    import Glibc
#endif

/// What can go wrong between a client and the daemon.
public enum ClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No connection could be made; `cause` says the likely reason in words.
    case cannotConnect(endpoint: String, cause: String)
    /// The daemon answered `"ok":false`: its error code (SPEC.md) and message.
    case response(code: String, message: String)
    /// The connection ended (the daemon stopped, or `close()` was called) before an answer came.
    case disconnected(String)
    /// The daemon sent something that is not a line of the protocol.
    case protocolViolation(String)

    public var description: String {
        switch self {
        case .cannotConnect(let endpoint, let cause): "cannot connect to \(endpoint): \(cause)"
        case .response(let code, let message): "\(code): \(message)"
        case .disconnected(let why): "disconnected: \(why)"
        case .protocolViolation(let what): "protocol violation: \(what)"
        }
    }

    /// Words for a failed `connect(2)` on a Unix socket, naming the usual fix.
    static func unixConnectCause(_ code: Int32, path: String) -> String {
        switch code {
        case ENOENT: "no socket at \(path): is diffcastd running? (make run, or systemctl start diffcast)"
        case ECONNREFUSED: "nobody listens on \(path): diffcastd is not running (a socket file left behind)"
        case EACCES, EPERM:
            "permission denied on \(path): join the socket's group (e.g. sudo usermod -aG diffcast $USER) or use sudo"
        case ENOTSOCK: "\(path) is not a socket"
        default: String(cString: strerror(code))
        }
    }
}

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
        case .response(let code, let message):
            // Some messages open with their code in words ("unauthorized: …"): said once.
            "\(code): \(message.dropPrefix(String(code.map { $0 == "_" ? " " : $0 }) + ": "))"
        case .disconnected(let why): "disconnected: \(why)"
        case .protocolViolation(let what): "protocol violation: \(what)"
        }
    }

    /// Words for a failed `connect(2)` on a Unix socket: what is at the path (`connect` says
    /// "connection refused" for a directory or a plain file too), else what the error means,
    /// with the usual fix. The path itself is named by `description`.
    static func unixConnectCause(_ code: Int32, path: String) -> String {
        var status = stat()
        if stat(path, &status) == 0, let kind = Self.nonSocketKind(status.st_mode) {
            return "it is \(kind), not a socket: name diffcastd's socket file instead"
        }
        switch code {
        case ENOENT:
            return "no such file: is diffcastd running, and is this its socket path? "
                + "(start it with make run, or systemctl start diffcast)"
        case ENOTDIR: return "a component of the path is not a directory: is this diffcastd's socket path?"
        case ECONNREFUSED:
            return "connection refused: a stale socket file that no daemon serves "
                + "(diffcastd is not running there; start it, or remove the file)"
        case EACCES, EPERM:
            return "permission denied on the socket or a directory above it: join the socket's group "
                + "(e.g. sudo usermod -aG diffcast $USER, then log in again) or use sudo"
        default: return String(cString: strerror(code))
        }
    }

    /// What a file that is not a socket is, in words; nil for a socket.
    private static func nonSocketKind(_ mode: mode_t) -> String? {
        switch mode & S_IFMT {
        case S_IFSOCK: nil
        case S_IFDIR: "a directory"
        case S_IFREG: "a regular file"
        default: "a special file"
        }
    }
}

extension String {
    fileprivate func dropPrefix(_ prefix: String) -> Substring {
        hasPrefix(prefix) ? dropFirst(prefix.count) : self[...]
    }
}

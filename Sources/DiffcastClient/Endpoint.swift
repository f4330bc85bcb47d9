#if canImport(Glibc)
    import Glibc
#endif

/// Where a daemon listens: its Unix socket, or a TCP address (which may need a token).
public enum Endpoint: Sendable, Equatable, CustomStringConvertible {
    case unix(path: String)
    case tcp(host: String, port: Int)

    /// The socket `diffcastd` listens on when nothing else is configured.
    public static let defaultSocketPath = "/tmp/diffcast.sock"

    /// `HOST:PORT` (e.g. `127.0.0.1:7070`, `[::1]:7070`) as a TCP endpoint; nil when it is not one.
    public init?(tcp text: String) {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]),
            (1...65535).contains(port)
        else { return nil }
        var host = String(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { return nil }
        self = .tcp(host: host, port: port)
    }

    public var description: String {
        switch self {
        case .unix(let path): path
        case .tcp(let host, let port): host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        }
    }
}

/// Where a connection arrived, one per kind of listener: it says how the connection is read
/// (lines or HTTP), who its peer can be (a local user with credentials, or an address), and what
/// it may ask for.
enum Endpoint: Equatable, CustomStringConvertible {
    /// The Unix socket: request lines from a local user, whose credentials the kernel gives.
    case socket
    /// `--tcp`: request lines over TCP.
    case tcp
    /// `--http`: the HTTP front end (requests, SSE, WebSocket, the page).
    case http
    /// `--metrics`: `/metrics` alone, for a scraper.
    case metrics

    /// Over TCP, where a peer is an address, not a user.
    var isTCP: Bool { self != .socket }

    /// Read as HTTP requests.
    var isHTTP: Bool { self == .http || self == .metrics }

    var description: String {
        switch self {
        case .socket: "socket"
        case .tcp: "tcp"
        case .http: "http"
        case .metrics: "metrics"
        }
    }
}

import DiffcastAccess
import DiffcastEngine
import DiffcastWire

/// Everything the server needs to run, already validated (the executable reads it from the
/// command line and the configuration file).
public struct ServerConfiguration: Sendable, Equatable {
    /// What to do with a subscriber whose unsent bytes pass `maximumUnsentBytes`.
    public enum SlowSubscriberPolicy: String, Sendable, CaseIterable {
        /// Stop queueing for it; once drained it gets one changeset (or snapshot) to now.
        case catchUp = "catch_up"
        /// Send an error line and close the connection.
        case disconnect
    }

    public var socketPath: String?
    /// `host:port` of an optional TCP listener (off unless set).
    public var tcpAddress: String?
    /// Required in an `auth` request before a TCP client may write, when set.
    public var tcpToken: String?
    /// `host:port` where `GET /metrics` serves Prometheus text (off unless set).
    public var metricsAddress: String?
    /// `host:port` of the HTTP front end (the API, Server-Sent Events, WebSocket and the
    /// inspector page; off unless set). It takes `tcpToken` as its token.
    public var httpAddress: String?
    /// Origins whose pages may call the HTTP front end (`*`: any); the daemon's own page always may.
    public var httpOrigins: [String] = []
    public var maximumLineBytes = 16 * 1024 * 1024
    public var maximumUnsentBytes = 8 * 1024 * 1024
    /// The kernel's send buffer of each TCP connection (`SO_SNDBUF`); 0 leaves it to the
    /// kernel, which grows it up to `tcp_wmem`'s maximum (4 MB on Debian). What the kernel holds
    /// is not among a subscriber's unsent bytes: a small buffer makes `maximumUnsentBytes` bound
    /// what a stalled TCP subscriber costs, and brings its catch-up sooner.
    public var tcpSendBufferBytes = 0
    public var slowSubscriberPolicy = SlowSubscriberPolicy.catchUp
    public var coalesceWindowMilliseconds = 0
    /// How long the events of an SSE or WebSocket stream may wait to be written together (0:
    /// each at once). See `Server.mayLinger`.
    public var streamLingerMilliseconds: UInt64 = 1
    /// How often an SSE stream gets a comment line (`ServerSentEvents.heartbeat`), so that
    /// proxies and load balancers do not close it while no event is due.
    public var streamHeartbeatMilliseconds: UInt64 = 15_000
    /// Threads that write a slice of subscribers together: the loop and `ioThreads - 1`
    /// helpers (`WriterThreads`); 1 writes on the loop alone.
    public var ioThreads = 1
    public var history = HistoryLimits()
    public var requestLimits = RequestLimits()
    public var limits = CollectionLimits()
    /// With a backbone: log messages of a collection between two of its snapshots.
    public var backboneSnapshotEvery = 1000
    /// Client connections at once; one more is told `limit_exceeded` and closed.
    public var maximumConnections = 10_000
    /// Who may write on the Unix socket (empty: whoever can open the socket file).
    public var publishers = AccessList()
    /// Who may read and subscribe on the Unix socket (empty: whoever can open the socket file).
    public var subscribers = AccessList()
    /// Verifies capability tokens (`auth_keys` and its settings); nil without a key set.
    public var tokenVerifier: TokenVerifier?
    /// The rights of a client that presented nothing, joined to every token's (`auth_anonymous`).
    public var anonymousRights = Rights.none
    /// Connections that tokens with one `sub` may hold at once.
    public var maximumConnectionsPerSubject = 100
    /// Addresses of reverse proxies whose `X-Forwarded-For` names the client (for logs and for
    /// slowing down refused tokens); any other peer's header is ignored.
    public var trustedProxies: [String] = []

    public init(socketPath: String? = nil) {
        self.socketPath = socketPath
    }
}

extension AccessList {
    /// Whether the peer of a Unix socket may: root always may, and so does anyone when the list
    /// is empty; a TCP or HTTP client (no credentials) only then. `groups` gives the peer's
    /// groups, asked for only when the list names groups.
    func allows(_ peer: PeerCredentials?, groups: (PeerCredentials) -> Set<UInt32>) -> Bool {
        if allowsEveryone { return true }
        guard let peer else { return false }
        return allows(userID: peer.userID, groupIDs: { groups(peer) })
    }
}

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
    public var maximumLineBytes = 16 * 1024 * 1024
    public var maximumUnsentBytes = 8 * 1024 * 1024
    public var slowSubscriberPolicy = SlowSubscriberPolicy.catchUp
    public var coalesceWindowMilliseconds = 0
    public var history = HistoryLimits()
    public var requestLimits = RequestLimits()

    public init(socketPath: String? = nil) {
        self.socketPath = socketPath
    }
}

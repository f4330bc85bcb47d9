import DiffcastCore

/// What a request asks for, typed; writes carry a `WriteOperation` from DiffcastCore.
public enum Command: Sendable, Equatable {
    case ping
    /// Presents the TCP listener's token; a TCP client may write only after it.
    case auth(token: String)
    case list
    case stats
    /// The collection, or with a window the view of it (contract 3).
    case get(collection: String, window: Window? = nil)
    /// With `window`, the subscription holds only that view (then `since` and `epoch` are nil).
    case subscribe(collection: String, since: UInt64?, epoch: String?, window: Window? = nil)
    /// Moves the window of the connection's windowed subscription to the collection.
    case window(collection: String, Window)
    case unsubscribe(collection: String)
    case drop(collection: String)
    case write(collection: String, WriteOperation)

    /// The collection the command names, if any.
    public var collection: String? {
        switch self {
        case .ping, .auth, .list, .stats: nil
        case .get(let name, _), .subscribe(let name, _, _, _), .window(let name, _), .unsubscribe(let name),
            .drop(let name), .write(let name, _):
            name
        }
    }
}

/// One parsed request line: the command plus what its response must echo.
public struct Request: Sendable, Equatable {
    /// The request's `id`, as canonical JSON, echoed in the response.
    public var id: JSONText?
    public var op: String
    public var command: Command
    /// The line the request came from, kept so a write can be logged and replayed as it was.
    public var line: [UInt8]

    public init(id: JSONText?, op: String, command: Command, line: [UInt8] = []) {
        self.id = id
        self.op = op
        self.command = command
        self.line = line
    }
}

/// A request that could not be parsed, with what is known of it for the error response.
public struct RequestError: Error, Sendable, Equatable {
    public var id: JSONText?
    public var op: String?
    public var error: DiffcastError

    public init(id: JSONText?, op: String?, error: DiffcastError) {
        self.id = id
        self.op = op
        self.error = error
    }
}

/// Limits a request must stay within, from the daemon's configuration.
public struct RequestLimits: Sendable, Equatable {
    public var maximumDepth: Int
    public var maximumIdentifierBytes: Int
    /// The most items a window may ask for (`max_window_items`).
    public var maximumWindowItems: Int

    public init(
        maximumDepth: Int = JSONParser.defaultMaximumDepth, maximumIdentifierBytes: Int = 1024,
        maximumWindowItems: Int = 10_000
    ) {
        self.maximumDepth = maximumDepth
        self.maximumIdentifierBytes = maximumIdentifierBytes
        self.maximumWindowItems = maximumWindowItems
    }
}

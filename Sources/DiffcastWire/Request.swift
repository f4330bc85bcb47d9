import DiffcastCore

/// What a request asks for, typed; writes carry a `WriteOperation` from DiffcastCore.
public enum Command: Sendable, Equatable {
    case ping
    /// Presents the TCP listener's token; a TCP client may write only after it.
    case auth(token: String)
    /// Lists collections; with `readable`, only those it holds (a scoped holder's).
    case list(readable: CollectionScope? = nil)
    case stats
    /// The collection, or with a window the view of it (contract 3).
    case get(collection: String, window: Window? = nil)
    /// With `window`, the subscription holds only that view (then `since` and `epoch` are nil).
    /// `createsMissing` is false for a holder that may not write the collection: a missing one
    /// is then `unknown_collection`.
    case subscribe(
        collection: String, since: UInt64?, epoch: String?, window: Window? = nil, createsMissing: Bool = true)
    /// Moves the window of the connection's windowed subscription to the collection.
    case window(collection: String, Window)
    case unsubscribe(collection: String)
    case drop(collection: String)
    case write(collection: String, WriteOperation)

    /// The collection the command names, if any.
    public var collection: String? {
        switch self {
        case .ping, .auth, .list, .stats: nil
        case .get(let name, _), .subscribe(let name, _, _, _, _), .window(let name, _), .unsubscribe(let name),
            .drop(let name), .write(let name, _):
            name
        }
    }
}

/// One parsed request line: the command plus what its response must echo.
///
/// Its fields are kept in one box, shared by every copy: a request goes from the loop's parser
/// through a `Job` to the engine and into its batch, and a copy is one retain instead of one
/// per field (its op, its command's items, its line), for one allocation more per parse.
public struct Request: Sendable, Equatable {
    /// The request's `id`, as canonical JSON, echoed in the response. Lent and inlinable, as
    /// `command` is: the loop and the engine read it (and `op`) for every request.
    @inlinable public var id: JSONText? {
        _read { yield fields.id }
        set { fields = Fields(id: newValue, op: op, command: command, line: line) }
    }
    @inlinable public var op: String {
        _read { yield fields.op }
        set { fields = Fields(id: id, op: newValue, command: command, line: line) }
    }
    /// Lent, not copied (`_read`), and inlinable: the loop and the engine read it for every
    /// request, and a read that returned it would copy the command out of its box (its
    /// collection, its items), across modules by a call.
    @inlinable public var command: Command {
        _read { yield fields.command }
        set { fields = Fields(id: id, op: op, command: newValue, line: line) }
    }
    /// The line the request came from, kept so a write can be logged and replayed as it was:
    /// empty when its parser does not keep lines (`RequestParser.keepsLines`).
    public var line: [UInt8] {
        get { fields.line }
        set {
            // The parser sets it on the request it just made: changed in place, not copied.
            if isKnownUniquelyReferenced(&fields) {
                fields.line = newValue
                fields.lineLength = newValue.count
            } else {
                fields = Fields(id: id, op: op, command: command, line: newValue)
            }
        }
    }
    /// How long the line the request came from was, whether or not it was kept: what the
    /// request costs to hold (the apply queue weighs batches by it).
    public var lineLength: Int { fields.lineLength }

    /// Immutable but for `line` and `lineLength`, which are changed only through a value that
    /// holds the box alone (copy on write, as `Array` does); hence the unchecked `Sendable`.
    @usableFromInline final class Fields: @unchecked Sendable {
        @usableFromInline let id: JSONText?
        @usableFromInline let op: String
        @usableFromInline let command: Command
        var line: [UInt8]
        var lineLength: Int

        @usableFromInline init(id: JSONText?, op: String, command: Command, line: [UInt8]) {
            self.id = id
            self.op = op
            self.command = command
            self.line = line
            self.lineLength = line.count
        }
    }

    @usableFromInline var fields: Fields

    public init(id: JSONText?, op: String, command: Command, line: [UInt8] = []) {
        fields = Fields(id: id, op: op, command: command, line: line)
    }

    /// Records the line the request was parsed from: its length always, its bytes when `keep`.
    mutating func record(line: UnsafeBufferPointer<UInt8>, keep: Bool) {
        if keep {
            self.line = Array(line)
        } else {
            if !isKnownUniquelyReferenced(&fields) { fields = Fields(id: id, op: op, command: command, line: []) }
            fields.lineLength = line.count
        }
    }

    public static func == (lhs: Request, rhs: Request) -> Bool {
        lhs.fields === rhs.fields
            || (lhs.id == rhs.id && lhs.op == rhs.op && lhs.command == rhs.command && lhs.line == rhs.line
                && lhs.lineLength == rhs.lineLength)
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

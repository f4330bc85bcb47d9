import DiffcastCore
import DiffcastWire

/// Identifies a client connection across threads; the loop owns the connection itself.
public typealias ConnectionID = UInt64

/// Where a response goes: the connection and the position of its request among that
/// connection's requests, so responses leave in request order.
public struct ResponseAddress: Hashable, Sendable {
    public var connection: ConnectionID
    public var slot: UInt64

    public init(connection: ConnectionID, slot: UInt64) {
        self.connection = connection
        self.slot = slot
    }
}

/// Work the loop hands to the apply queue.
public enum Job: Sendable {
    /// A request that needs the collections' state (writes, get, subscribe, drop, list, stats).
    case request(Request, ResponseAddress)
    /// A subscriber that fell behind has drained: bring it from `since` to the current version
    /// (a windowed one from the view of `window` at `since` to its window's view now).
    case catchUp(connection: ConnectionID, collection: String, since: UInt64, window: WindowRange? = nil)
    /// A windowed subscription ended on the loop (unsubscribe, a closed connection): its
    /// window is no longer computed for it.
    case leaveWindow(connection: ConnectionID, collection: String)
    /// New limits from a configuration reload, for the writes after it.
    case setLimits(CollectionLimits)
}

extension Job {
    /// Whether the job changes a collection (a write or a drop).
    public var isWrite: Bool {
        guard case .request(let request, _) = self else { return false }
        switch request.command {
        case .write, .drop: return true
        default: return false
        }
    }
}

/// A version of a collection: a write's response waits until the writer, if it follows that
/// collection, has been sent the event that brings it.
public struct VersionMark: Sendable, Hashable {
    public var collection: String
    public var version: UInt64

    public init(collection: String, version: UInt64) {
        self.collection = collection
        self.version = version
    }
}

/// Results the apply queue hands back to the loop, in the order they must take effect:
/// responses and events as values, each with the bytes it goes out as.
public enum Outcome: Sendable {
    case response(ResponseAddress, Encoded<Response>)
    /// An answer another daemon wrote (a collection's owner, to a read forwarded with writes),
    /// passed on as it came.
    case relayed(ResponseAddress, SharedBytes)
    /// The responses to `writes` writes in consecutive slots from `address.slot`, each
    /// answered with `response` (a pipelining writer's id-less writes of one version are one
    /// run), visible from `mark.version` on.
    case acknowledged(ResponseAddress, Encoded<Response>, VersionMark, writes: Int)
    /// A new version: `event` goes to every whole subscriber that holds `from`, and each of
    /// `windows` to the subscribers of a window whose view it changed.
    case published(
        collection: String, from: UInt64, to: UInt64, event: Encoded<Event>, windows: [WindowDelivery] = [])
    /// A subscription starts at `version`; `event` (snapshot or changeset), if any, goes first.
    /// With `window`, it is a windowed subscription in that group.
    case subscribed(
        ResponseAddress, collection: String, version: UInt64, event: Encoded<Event>?, response: Encoded<Response>,
        window: WindowJoin? = nil)
    /// A windowed subscription moved to another window at `version`; `event` takes a subscriber
    /// that holds its old window's view there to the new one (nil: the view is the same).
    case rewindowed(
        ResponseAddress, collection: String, version: UInt64, window: WindowJoin, event: WindowEvent?,
        response: Encoded<Response>)
    /// `event` (nil when nothing changed) brings a subscriber that fell behind to `version`;
    /// a windowed one now holds the view of `window`.
    case caughtUp(
        connection: ConnectionID, collection: String, version: UInt64, event: Encoded<Event>?,
        window: WindowRange? = nil)
    case dropped(collection: String)
    /// `list` and `stats` answers, finished by the loop, which knows the subscribers (the rows'
    /// `subscribers` are filled in there).
    case listing(ResponseAddress, id: JSONText?, collections: [CollectionRow])
    case statistics(ResponseAddress, id: JSONText?, ApplyStatistics)
    /// The state directory stopped taking writes (with why) or takes them again (nil).
    case storage(readOnlyReason: String?)
}

/// Counters of the apply queue for `stats`.
public struct ApplyStatistics: Sendable {
    public var collections = 0
    public var writesApplied: UInt64 = 0
    public var writesRejected: UInt64 = 0
    public var versionsPublished: UInt64 = 0
    public var batches: UInt64 = 0
    /// Why writes are refused (a full disk), or nil while they are taken.
    public var readOnlyReason: String?
    /// fdatasync calls on the write-ahead log (0 without a state directory).
    public var logSyncs: UInt64 = 0
    /// With a backbone: where this daemon stands among the others.
    public var backbone: BackboneStatistics?

    public init() {}
}

/// A daemon's place in a backbone, for `stats`.
public struct BackboneStatistics: Sendable {
    /// This daemon's name (the owner named in forwarding and in the leases).
    public var node: String
    /// Collections whose lease this daemon holds.
    public var ownedCollections: Int
    /// The shared log has been applied through this sequence.
    public var logApplied: UInt64
    /// Writes this daemon sent to another daemon, and answered with its answer.
    public var writesForwarded: UInt64
    /// Log messages skipped because they could not be applied (see `SharedLogApplier`).
    public var logSkipped: UInt64
    /// How far the stream was past the last message that reached this daemon, when last checked.
    public var logBehind: UInt64
}

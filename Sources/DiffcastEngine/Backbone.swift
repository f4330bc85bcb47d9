/// What the apply queue needs when several daemons share one namespace of collections
/// (`--backbone`): who owns a collection, a shared log every daemon follows, and forwarding of
/// writes to a collection's owner. `DiffcastBackbone` implements it on NATS JetStream; the
/// server knows nothing of NATS.
///
/// Every method but `start` and `stop` is called on the apply worker only, and may block there
/// (never on the loop thread).
public protocol Backbone: AnyObject, Sendable {
    /// This daemon's name among the others (unique per process start).
    var node: String { get }
    /// How many collections this daemon holds the lease of now.
    var ownedCollections: Int { get }
    /// How many stream sequences the shared log held, when last checked, past the last message
    /// that reached this daemon: 0 when it keeps up.
    var logBehind: UInt64 { get }
    /// Starts following the shared log and taking forwarded writes. `wake` is called, on any
    /// thread, whenever `takeArrivals` has something new. Returns the collections' snapshots and
    /// the log's last sequence, which the queue applies before the daemon serves.
    func start(wake: @escaping @Sendable () -> Void) throws -> BackboneStart
    /// Log messages and forwarded batches that arrived since the last call, in arrival order.
    func takeArrivals() -> BackboneArrivals
    /// Blocks until something arrives for `takeArrivals`, or the timeout passes.
    func waitForArrivals(timeoutMilliseconds: Int)
    /// Whether this daemon may write `collection` now, taking its lease when nobody holds it.
    func claim(_ collection: String) -> Claim
    /// Gives up a lease whose log moved on without us (or could not be appended to).
    func release(_ collection: String)
    /// Appends one collection's records of one batch to the log as one message, only if the
    /// collection's last message is still `after`; the message id makes retries idempotent.
    func append(_ records: [LogRecord], of collection: String, after: UInt64, messageID: String) -> AppendResult
    /// Sends request lines of one collection to its owner (found, or made, by the backbone) and
    /// waits for the answer, calling `serving` whenever something arrives meanwhile: two owners
    /// forwarding to each other must not wait for each other.
    func forward(
        _ lines: [[UInt8]], of collection: String, ownerHint: String?, serving: () -> Void
    ) -> ForwardResult
    /// Keeps a collection's snapshot taken at log message `sequence`, then cuts the messages
    /// before that one from its log (the last one stays: appends are checked against it).
    func saveSnapshot(_ snapshot: [UInt8], of collection: String, at sequence: UInt64)
    /// The collection's latest snapshot; nil when it has none. Throws when the store could not
    /// be asked (the caller tries again later rather than taking "none" for an answer).
    func loadSnapshot(of collection: String) throws -> [UInt8]?
    /// The log's last sequence now, asked of the log itself: no snapshot can name a later one.
    func logEnd() throws -> UInt64
    /// Stops following, releases every lease, and closes.
    func stop()
}

/// One message of the shared log: the records of one batch of one collection.
public struct LogMessage: Sendable {
    public var sequence: UInt64
    /// The collection the message's subject names (nil when the subject names none); its
    /// records must all be about this one.
    public var collection: String?
    /// The decoded records; empty when the payload does not decode.
    public var records: [LogRecord]

    public init(sequence: UInt64, collection: String?, records: [LogRecord]) {
        self.sequence = sequence
        self.collection = collection
        self.records = records
    }
}

/// Request lines another daemon forwarded to this one as the collection's owner, and where the
/// answer goes.
public struct ForwardedBatch: Sendable {
    public var lines: [[UInt8]]
    public var reply: @Sendable (ForwardReply) -> Void

    public init(lines: [[UInt8]], reply: @escaping @Sendable (ForwardReply) -> Void) {
        self.lines = lines
        self.reply = reply
    }
}

/// Where a daemon that joins starts: every collection's latest snapshot, and the end of the
/// log at that moment.
public struct BackboneStart: Sendable {
    public var snapshots: [[UInt8]]
    public var logEnd: UInt64

    public init(snapshots: [[UInt8]], logEnd: UInt64) {
        self.snapshots = snapshots
        self.logEnd = logEnd
    }
}

public struct BackboneArrivals: Sendable {
    public var log: [LogMessage] = []
    public var forwarded: [ForwardedBatch] = []

    public init(log: [LogMessage] = [], forwarded: [ForwardedBatch] = []) {
        self.log = log
        self.forwarded = forwarded
    }
}

/// Who may write a collection now.
public enum Claim: Sendable, Equatable {
    /// This daemon holds the lease. When it was just taken, `catchUpTo` is the collection's last
    /// log sequence, which must be applied before writing.
    case owned(catchUpTo: UInt64?)
    /// Another daemon holds it.
    case heldBy(String)
    /// Nobody holds it and this daemon may not take it (it never owns), or the lease store did
    /// not answer.
    case notOwned(reason: String)
}

public enum AppendResult: Sendable, Equatable {
    case stored(sequence: UInt64)
    /// The collection's log moved past `after`: another daemon wrote it. Nothing was stored.
    case fenced
    /// The log could not take it in time; it may or may not have been stored.
    case failed(String)
}

public enum ForwardResult: Sendable {
    /// The owner answered each line (same order); its log holds the collection through
    /// `sequence`.
    case answered(sequence: UInt64, responses: [[UInt8]])
    case unavailable(String)
}

/// An owner's answer to a forwarded batch.
public enum ForwardReply: Sendable {
    case answered(sequence: UInt64, responses: [[UInt8]])
    /// This daemon does not own the collection; `owner` does, when known.
    case notOwner(owner: String?)
    case unavailable(String)
}

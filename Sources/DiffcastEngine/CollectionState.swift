import DiffcastCore

/// Earlier versions of a collection, oldest first: what catch-up changesets are taken from.
public typealias VersionHistory = [(version: UInt64, snapshot: Snapshot)]

/// One collection as the apply queue holds it: the document, its version and epoch, and recent
/// snapshots by version, from which a subscriber that fell behind gets one changeset.
final class CollectionState {
    let name: String
    let epoch: String
    var document = Document()
    var version: UInt64 = 0
    /// False until a write succeeds or a subscriber names it: a rejected first write leaves no
    /// collection behind.
    var exists = false
    private(set) var history: VersionHistory = []
    /// Items summed over `history`'s snapshots, kept as they come and go: summing them again
    /// for every version retained and released each of up to 64 snapshots, a tenth of the
    /// daemon's time one write at a time.
    private var retainedItems = 0
    /// The writes applied since the last published version, while the engine collects them.
    var openBatch: OpenBatch?
    /// The windows its windowed subscribers hold.
    var windows = WindowGroups()

    init(name: String, epoch: String) {
        self.name = name
        self.epoch = epoch
    }

    /// Remembers `snapshot` as the state at `version`, dropping the oldest entries past the
    /// limits (the engine's, passed in rather than kept by each of its collections).
    func remember(_ snapshot: Snapshot, as version: UInt64, within historyLimits: HistoryLimits) {
        history.append((version, snapshot))
        retainedItems += snapshot.itemCount
        var dropped = 0
        while history.count - dropped > historyLimits.versions
            || (history.count - dropped > 1 && retainedItems > historyLimits.items)
        {
            retainedItems -= history[dropped].snapshot.itemCount
            dropped += 1
        }
        history.removeFirst(dropped)
    }

    func snapshot(at version: UInt64) -> Snapshot? {
        history.last { $0.version == version }?.snapshot
    }

    /// What a batch may change beyond the document, to put back if the batch cannot be made
    /// durable; the document keeps its own undo log (`Document.beginTransaction()`), so saving
    /// costs nothing per item.
    struct Saved {
        let state: CollectionState
        let version: UInt64
        let exists: Bool
        let history: [(version: UInt64, snapshot: Snapshot)]
        /// The windows as they were: a version that is undone must not have moved them on.
        let windows: WindowGroups
    }

    func save() -> Saved {
        document.beginTransaction()
        return Saved(state: self, version: version, exists: exists, history: history, windows: windows)
    }

    func restore(_ saved: Saved) {
        document.rollBackTransaction()
        version = saved.version
        exists = saved.exists
        history = saved.history
        retainedItems = history.reduce(0) { $0 + $1.snapshot.itemCount }
        windows = saved.windows
    }

    /// The batch was made durable: its writes stay.
    func commit() {
        document.commitTransaction()
    }
}

/// Writes to one collection waiting to be published together as one version.
struct OpenBatch {
    /// What the writes answer once published: the version is known only then.
    struct Acknowledgement {
        let address: ResponseAddress
        let id: JSONText?
        let op: String
        /// The request line, for the log.
        let line: [UInt8]
    }

    /// The snapshot the batch started from, which the changeset is taken against.
    let base: Snapshot
    var acknowledgements: [Acknowledgement] = []
}

/// How much history a collection keeps for catch-up changesets.
public struct HistoryLimits: Sendable, Equatable {
    /// At most this many versions.
    public var versions: Int
    /// At most this many items summed over the retained snapshots (they share unchanged
    /// sections, so this bounds memory from above).
    public var items: Int

    public init(versions: Int = 64, items: Int = 4_000_000) {
        self.versions = versions
        self.items = items
    }
}

/// Bounds on what clients may make the daemon hold; past one, a write gets `limit_exceeded`.
public struct CollectionLimits: Sendable, Equatable {
    public var collections: Int
    public var itemsPerCollection: Int

    public init(collections: Int = 100_000, itemsPerCollection: Int = 10_000_000) {
        self.collections = collections
        self.itemsPerCollection = itemsPerCollection
    }
}

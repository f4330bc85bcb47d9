import DiffcastCore
import DiffcastWire

/// Earlier versions of a collection, oldest first: what catch-up changesets are taken from.
public typealias VersionHistory = [(version: UInt64, snapshot: Snapshot)]

/// One collection as the apply queue holds it: the document, its version and epoch, and the
/// snapshots of earlier versions, from which a subscriber that fell behind gets one changeset.
final class CollectionState {
    let name: String
    let epoch: String
    var document = Document()
    /// The version published last: the document's snapshot, or the open batch's base while
    /// writes wait to be published.
    private(set) var version: UInt64 = 0

    /// Whether a logged batch that made `batchVersion` follows the version held: the one rule
    /// that recovery, the shared log and its followers apply to every batch they replay.
    func isFollowed(byBatchAt batchVersion: UInt64) -> Bool {
        batchVersion > 0 && batchVersion - 1 == version
    }
    /// False until a write succeeds or a subscriber names it: a rejected first write leaves no
    /// collection behind.
    var exists = false
    /// Whether the empty version 0 is among the earlier versions kept: every collection starts
    /// there, so it is remembered by this flag rather than by an entry of `earlier`.
    private var keepsEmptyStart = false
    /// Where the engine keeps the writes applied since the last published version
    /// (`ApplyEngine.openBatches`), or -1 when there are none. 32 bits beside the two flags,
    /// in a word they half fill: the batch itself, held here, would take 24 bytes of every idle
    /// collection.
    var openBatchSlot: Int32 = -1
    /// What a collection holds once it has an earlier version past the empty start, or a
    /// windowed subscriber: in a box made then, so that an idle collection holds 8 bytes for it
    /// rather than 24 (its object then fits a 160-byte chunk).
    private var historyAndWindows: HistoryAndWindows?

    private final class HistoryAndWindows {
        /// Earlier versions, oldest first, past the empty start. The version published last is
        /// not among them: the document (or the open batch's base) holds it. An idle collection
        /// that took one write thus keeps no array at all.
        var earlier: VersionHistory = []
        /// Items summed over `earlier`'s snapshots, kept as they come and go: summing them again
        /// for every version would retain and release each of up to 64 snapshots, on the path of
        /// every write.
        var earlierItems = 0
        var windows = WindowGroups()
    }

    private var earlier: VersionHistory { historyAndWindows?.earlier ?? [] }
    private var earlierItems: Int { historyAndWindows?.earlierItems ?? 0 }

    /// The box, made when there is none.
    private var historyAndWindowsBox: HistoryAndWindows {
        if let historyAndWindows { return historyAndWindows }
        let made = HistoryAndWindows()
        historyAndWindows = made
        return made
    }

    /// The windows its windowed subscribers hold. Changing them makes the box only when a
    /// window is left (a subscription's end calls `leave` on every collection it named).
    var windows: WindowGroups {
        get { historyAndWindows?.windows ?? WindowGroups() }
        _modify {
            if let historyAndWindows {
                yield &historyAndWindows.windows
            } else {
                var windows = WindowGroups()
                yield &windows
                if !windows.isEmpty { historyAndWindowsBox.windows = windows }
            }
        }
    }

    init(name: String, epoch: String) {
        self.name = name
        self.epoch = epoch
    }

    /// The snapshot of every earlier version kept, oldest first (for a checkpoint).
    var history: VersionHistory {
        keepsEmptyStart ? [(0, Snapshot())] + earlier : earlier
    }

    /// Moves the collection on to `newVersion`, which the document now holds, keeping
    /// `previous` (the snapshot of the version it leaves) for catch-ups as far as the limits
    /// allow.
    func advance(to newVersion: UInt64, leaving previous: Snapshot, within historyLimits: HistoryLimits) {
        keep(previous, as: version)
        version = newVersion
        forgetOldest(within: historyLimits)
    }

    /// Keeps the earlier versions of a restored collection (`past`, oldest first; any not
    /// before `current` is left out) as far as the limits allow, and sets the version published
    /// last to `current`.
    func restore(earlier past: VersionHistory, current: UInt64, within historyLimits: HistoryLimits) {
        for entry in past where entry.version < current { keep(entry.snapshot, as: entry.version) }
        version = current
        forgetOldest(within: historyLimits)
    }

    /// Adds `snapshot`, at `version`, as the newest earlier version.
    private func keep(_ snapshot: Snapshot, as version: UInt64) {
        if version == 0, earlier.isEmpty, !keepsEmptyStart, snapshot.sections.isEmpty {
            keepsEmptyStart = true
            return
        }
        let historyAndWindows = historyAndWindowsBox
        historyAndWindows.earlier.append((version, snapshot))
        historyAndWindows.earlierItems += snapshot.itemCount
    }

    /// Drops the oldest earlier versions past the limits (the engine's, passed in rather than
    /// kept by each of its collections): at most `versions` with the current one, and at most
    /// `items` summed over them, the current one always kept.
    private func forgetOldest(within historyLimits: HistoryLimits) {
        let currentItems = document.itemCount
        // Read in the box, not copied out: a copy would make the removal below copy the array.
        let earlierCount = historyAndWindows?.earlier.count ?? 0
        var earlierItems = self.earlierItems
        var kept: Int { earlierCount + (keepsEmptyStart ? 1 : 0) + 1 }
        var dropped = 0
        while kept - dropped > historyLimits.versions
            || (kept - dropped > 1 && earlierItems + currentItems > historyLimits.items)
        {
            if keepsEmptyStart {
                keepsEmptyStart = false
                continue
            }
            guard let historyAndWindows else { break }
            earlierItems -= historyAndWindows.earlier[dropped].snapshot.itemCount
            dropped += 1
        }
        guard dropped > 0, let historyAndWindows else { return }
        historyAndWindows.earlier.removeFirst(dropped)
        historyAndWindows.earlierItems = earlierItems
    }

    /// The snapshot of `version`, when it is kept, with no batch open: the document then holds
    /// the version published last. (With a batch open, that version is the batch's base, which
    /// the engine keeps: `ApplyEngine.snapshot(of:at:)`.)
    func snapshot(at version: UInt64) -> Snapshot? {
        if version == self.version { return document.snapshot }
        if version == 0, keepsEmptyStart { return Snapshot() }
        return earlier.last { $0.version == version }?.snapshot
    }

    /// What a batch may change beyond the document, to put back if the batch cannot be made
    /// durable; the document keeps its own undo log (`Document.beginTransaction()`), so saving
    /// costs nothing per item.
    struct Saved {
        let state: CollectionState
        let version: UInt64
        let exists: Bool
        let keepsEmptyStart: Bool
        let earlier: VersionHistory
        /// The windows as they were: a version that is undone must not have moved them on.
        let windows: WindowGroups
    }

    func save() -> Saved {
        document.beginTransaction()
        return Saved(
            state: self, version: version, exists: exists, keepsEmptyStart: keepsEmptyStart, earlier: earlier,
            windows: windows)
    }

    func restore(_ saved: Saved) {
        document.rollBackTransaction()
        version = saved.version
        exists = saved.exists
        keepsEmptyStart = saved.keepsEmptyStart
        if saved.earlier.isEmpty && saved.windows.isEmpty {
            historyAndWindows = nil
        } else {
            let historyAndWindows = historyAndWindowsBox
            historyAndWindows.earlier = saved.earlier
            historyAndWindows.earlierItems = saved.earlier.reduce(0) { $0 + $1.snapshot.itemCount }
            historyAndWindows.windows = saved.windows
        }
    }

    /// The batch was made durable: its writes stay.
    func commit() {
        document.commitTransaction()
    }
}

/// Writes to one collection waiting to be published together as one version.
///
/// Kept by the engine, not by the collection, which holds only its place: a collection has a
/// batch from its first write to the version that publishes it, so an idle one is 24 bytes
/// smaller.
struct OpenBatch {
    /// What the writes answer once published: the version is known only then. It keeps the
    /// request, one reference to its fields (its id and op for the answer, its line for the log).
    struct Acknowledgement {
        let address: ResponseAddress
        let request: Request

        var id: JSONText? { request.id }
        var op: String { request.op }
        /// The request line, for the log.
        var line: [UInt8] { request.line }
    }

    let state: CollectionState
    /// The snapshot the batch started from, which the changeset is taken against.
    let base: Snapshot
    var acknowledgements: [Acknowledgement] = []

    /// The most writes a batch makes room for before they come.
    static let reservedWrites = 256

    /// A batch of `state`'s writes with room for `expectedWrites` (at most `reservedWrites`).
    init(of state: CollectionState, expectedWrites: Int) {
        self.state = state
        self.base = state.document.snapshot
        acknowledgements.reserveCapacity(min(expectedWrites, Self.reservedWrites))
    }
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

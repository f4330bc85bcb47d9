import DiffcastCore
import DiffcastWire
import Logging

/// The single source of truth for every collection. It applies requests in arrival order,
/// coalesces the writes to one collection that arrive together into one changeset, and says
/// what to send as `Outcome`s. It has no threads and no sockets: `ApplyQueue` runs it.
public final class ApplyEngine {
    var collections = CollectionTable()
    /// The writes waiting to be published, one batch per collection, in no particular order
    /// (they are published in the order of their collections' names). A collection knows its
    /// batch's place (`CollectionState.openBatchSlot`).
    var openBatches: [OpenBatch] = []
    /// How many writes the batch published last held: a new batch makes room for as many at
    /// once (at most `OpenBatch.reservedWrites`; a feed's batches are alike), instead of growing
    /// its list write by write.
    var writesInLastBatch = 0
    var statistics = ApplyStatistics()
    let historyLimits: HistoryLimits
    var limits: CollectionLimits
    private let makeEpoch: () -> String
    /// Debug lines for rejected requests.
    let logger: Logger?
    var outcomes: [Outcome] = []
    /// What the state directory must record before the outcomes of this batch are delivered.
    var logRecords: [LogRecord] = []
    /// Each collection the current batch touched, as it was before (nil: it did not exist), so
    /// a batch that cannot be made durable is undone as if it never ran.
    private var undo: [String: CollectionState.Saved?] = [:]
    /// Whether the last `process` dropped a collection.
    var droppedCollections = false
    private var statisticsBeforeBatch = ApplyStatistics()
    /// The last window group made (`nextWindowGroup`).
    var lastWindowGroup: WindowGroupID = 0
    /// Whether a batch's log records are kept, and what it changes remembered so that it can be
    /// undone (`rollBackLastBatch`) when the records cannot be written. The `BatchCommit` sets it:
    /// in memory alone there is nothing to write them to, and a batch is final once applied.
    public var keepsLogRecords = true
    /// While set, writes (and anything else that would have to be logged) are answered
    /// `unavailable` with this reason; reads and subscriptions go on.
    public var readOnlyReason: String?

    /// `requestLimits` are the loop's: a logged or forwarded line is read again as it was read
    /// when it was taken.
    public init(
        historyLimits: HistoryLimits = HistoryLimits(), limits: CollectionLimits = CollectionLimits(),
        requestLimits: RequestLimits = RequestLimits(), makeEpoch: @escaping () -> String = ApplyEngine.randomEpoch,
        logger: Logger? = nil
    ) {
        self.logger = logger
        self.historyLimits = historyLimits
        self.limits = limits
        self.lineParser = RequestParser(limits: requestLimits)
        self.makeEpoch = makeEpoch
    }

    /// Reads logged and forwarded request lines with the loop's limits.
    let lineParser: RequestParser

    /// 60 random bits as 15 hex digits: short enough for Swift to keep the string inline, so
    /// an epoch costs a collection no allocation.
    public static func randomEpoch() -> String {
        var generator = SystemRandomNumberGenerator()
        let value = (generator.next() as UInt64) >> 4
        let hex = String(value, radix: 16)
        return String(repeating: "0", count: 15 - hex.count) + hex
    }

    /// Processes jobs in order; writes to a collection stay open until something else needs
    /// that collection or the jobs run out, then publish as one version.
    public func process(_ jobs: [Job]) -> [Outcome] {
        // A new batch makes the last one final, for callers that did not commit it themselves.
        _ = commitLastBatch()
        statisticsBeforeBatch = statistics
        statistics.batches += 1
        for job in jobs {
            switch job {
            case .request(let request, let address):
                handle(request, address)
            case .catchUp(let connection, let name, let since, let window):
                publishOpenBatch(of: name)
                catchUp(connection: connection, name: name, since: since, window: window)
            case .leaveWindow(let connection, let name):
                collections[name]?.windows.leave(connection)
            case .setLimits(let newLimits):
                limits = newLimits
            }
        }
        publishAllOpenBatches()
        defer { outcomes = [] }
        return outcomes
    }

    /// Keeps what the last `process` did (it was made durable, or there is no state directory)
    /// and forgets how to undo it. Returns whether it dropped collections, whose memory the
    /// caller may now give back to the system.
    public func commitLastBatch() -> Bool {
        for case let saved? in undo.values { saved.state.commit() }
        undo = [:]
        defer { droppedCollections = false }
        return droppedCollections
    }

    /// Puts every collection the last `process` touched back as it was, and forgets its log
    /// records: for a batch whose records could not be made durable. Its outcomes must not be
    /// delivered.
    public func rollBackLastBatch() {
        assert(keepsLogRecords, "a batch whose changes were not remembered cannot be undone")
        for (name, saved) in undo {
            if let saved {
                saved.state.restore(saved)
                collections[name] = saved.state
            } else {
                collections[name] = nil
            }
        }
        undo = [:]
        droppedCollections = false
        for batch in openBatches { batch.state.openBatchSlot = -1 }
        openBatches = []
        logRecords = []
        statistics = statisticsBeforeBatch
    }

    /// Remembers how a collection was before the current batch first changes it.
    func rememberBeforeChange(_ name: String) {
        guard keepsLogRecords, undo[name] == nil else { return }
        undo[name] = .some(collections[name]?.save())
    }

    func handle(_ request: Request, _ address: ResponseAddress) {
        if let reason = readOnlyReason, changesLog(request.command) {
            if case .write = request.command { statistics.writesRejected += 1 }
            return fail(request, address, .unavailable(reason))
        }
        switch request.command {
        case .write(let name, let operation):
            write(operation, to: name, request, address)
        case .get(let name, let window):
            get(name, window: window, request, address)
        case .subscribe(let name, let since, let epoch, let window, let createsMissing):
            publishOpenBatch(of: name)
            if !createsMissing && existing(name) == nil {
                // A holder that may only read a collection does not bring it into being.
                return fail(request, address, .unknownCollection(name))
            }
            if collections[name] == nil && isAtCollectionLimit {
                return fail(
                    request, address, .limitExceeded("max_collections (\(limits.collections)) collections exist"))
            }
            if let window {
                subscribe(name, window: window, request, address)
            } else {
                subscribe(name, since: since, epoch: epoch, request, address)
            }
        case .window(let name, let window):
            publishOpenBatch(of: name)
            rewindow(name, window, request, address)
        case .drop(let name):
            drop(name, request, address)
        case .list(let readable):
            publishAllOpenBatches()
            outcomes.append(.listing(address, id: request.id, collections: rows(readable: readable)))
        case .stats:
            publishAllOpenBatches()
            statistics.collections = collections.count { $0.exists }
            statistics.readOnlyReason = readOnlyReason
            outcomes.append(.statistics(address, id: request.id, statistics))
        case .ping, .auth, .unsubscribe:
            // Answered by the loop; accepted here so that the engine can serve any request.
            answer(request, address)
        }
    }

    /// The state of a collection, or of a window onto it, as of every write before the request.
    private func get(_ name: String, window: Window?, _ request: Request, _ address: ResponseAddress) {
        publishOpenBatch(of: name)
        guard let state = existing(name) else {
            return fail(request, address, .unknownCollection(name))
        }
        if let window { return getView(of: state, window, request, address) }
        answer(
            request, address,
            .state(collection: name, epoch: state.epoch, version: state.version, state.document.snapshot, window: nil))
    }

    /// Drops a collection: its subscribers are told, and a later write starts a new epoch.
    private func drop(_ name: String, _ request: Request, _ address: ResponseAddress) {
        publishOpenBatch(of: name)
        guard existing(name) != nil else {
            return fail(request, address, .unknownCollection(name))
        }
        rememberBeforeChange(name)
        collections[name] = nil
        droppedCollections = true
        journal(.drop(collection: name))
        outcomes.append(.dropped(collection: name))
        answer(request, address)
    }

    /// The rows of `list`: the collections that exist and that the holder may read (all when
    /// `readable` is nil), by name.
    private func rows(readable: CollectionScope?) -> [CollectionRow] {
        let shown = collections.filter { $0.exists && readable?.contains($0.name) != false }
        return shown.sorted { $0.name < $1.name }.map { state in
            CollectionRow(
                name: state.name, version: state.version, sections: state.document.snapshot.sections.count,
                items: state.document.itemCount, subscribers: 0)
        }
    }

    /// Whether a request would change what the log holds: writes, drops, and a subscription
    /// that creates its collection. Refused while read-only; with a backbone, only a
    /// collection's owner may run them.
    public func changesLog(_ command: Command) -> Bool {
        switch command {
        case .write, .drop: true
        case .subscribe(let name, _, _, let window, let createsMissing):
            // An anchor cannot be in a collection that does not exist: that subscribe is refused,
            // and so is one that may not create it.
            createsMissing && existing(name) == nil && window?.anchor == nil
        default: false
        }
    }

    /// Marks a collection as existing, logging its creation the first time.
    func materialize(_ state: CollectionState) {
        guard !state.exists else { return }
        state.exists = true
        journal(.create(collection: state.name, epoch: state.epoch))
    }

    func journal(_ record: @autoclosure () -> LogRecord) {
        if keepsLogRecords { logRecords.append(record()) }
    }

    /// Everything to log since the last call, in order.
    public func takeLogRecords() -> [LogRecord] {
        logRecords.swapAndClear()
    }

    func existing(_ name: String) -> CollectionState? {
        guard let state = collections[name], state.exists else { return nil }
        return state
    }

    /// Whether one more collection would pass `limits.collections`.
    var isAtCollectionLimit: Bool { collections.count >= limits.collections }

    func state(for name: String) -> CollectionState {
        if let state = collections[name] { return state }
        let state = CollectionState(name: name, epoch: makeEpoch())
        collections[name] = state
        return state
    }

    func fail(_ request: Request, _ address: ResponseAddress, _ error: DiffcastError) {
        logger?.debug(
            "request rejected",
            metadata: ["op": "\(request.op)", "code": "\(error.code)", "message": "\(error.message)"])
        outcomes.append(.response(address, Encoded(.failure(id: request.id, op: request.op, error))))
    }

    func answer(_ request: Request, _ address: ResponseAddress, _ answer: Answer = .done) {
        outcomes.append(.response(address, Encoded(.success(id: request.id, op: request.op, answer))))
    }

}

/// The log does not fit the state it is replayed onto.
public enum RecoveryError: Error, CustomStringConvertible {
    case inconsistent(String)

    public var description: String {
        switch self {
        case .inconsistent(let what): "write-ahead log does not fit the checkpoint: \(what)"
        }
    }
}

extension WriteOperation {
    /// An upper bound of the items a collection holding `current` items has after this write.
    func mostItemsAfter(current: Int) -> Int {
        switch self {
        case .apply(let sections): sections.reduce(0) { $0 + $1.items.count }
        case .appendSections(let sections), .insertSections(let sections, _):
            current + sections.reduce(0) { $0 + $1.items.count }
        case .appendItems(let items, _), .insertItems(let items, _): current + items.count
        case .deleteAll: 0
        case .batch(let operations):
            operations.reduce(current) { most, operation in max(most, operation.mostItemsAfter(current: most)) }
        default: current
        }
    }
}

import DiffcastCore
import DiffcastWire
import Logging

/// The single source of truth for every collection. It applies requests in arrival order,
/// coalesces the writes to one collection that arrive together into one changeset, and says
/// what to send as `Outcome`s. It has no threads and no sockets: `ApplyQueue` runs it.
public final class ApplyEngine {
    private var collections: [String: CollectionState] = [:]
    /// The collections whose writes wait to be published, in the order they were opened.
    private var openBatches: [CollectionState] = []
    private var statistics = ApplyStatistics()
    private let historyLimits: HistoryLimits
    private var limits: CollectionLimits
    private let makeEpoch: () -> String
    /// Debug lines for rejected requests.
    private let logger: Logger?
    private var outcomes: [Outcome] = []
    /// What the state directory must record before the outcomes of this batch are delivered.
    private var logRecords: [LogRecord] = []
    /// Each collection the current batch touched, as it was before (nil: it did not exist), so
    /// a batch that cannot be made durable is undone as if it never ran.
    private var undo: [String: CollectionState.Saved?] = [:]
    /// Whether the last `process` dropped a collection.
    private var droppedCollections = false
    private var statisticsBeforeBatch = ApplyStatistics()
    /// Whether batches are journaled: their log records kept, and what they change remembered
    /// so that they can be undone (`rollBackLastBatch`) when the records cannot be written.
    /// Without a state store or a shared log there is nothing to write them to, and a batch
    /// is final as soon as it is applied.
    public var journals = true
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
        assert(journals, "a batch that is not journaled cannot be undone")
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
        for state in openBatches { state.openBatch = nil }
        openBatches = []
        logRecords = []
        statistics = statisticsBeforeBatch
    }

    /// Remembers how a collection was before the current batch first changes it.
    private func touch(_ name: String) {
        guard journals, undo[name] == nil else { return }
        undo[name] = .some(collections[name]?.save())
    }

    private func handle(_ request: Request, _ address: ResponseAddress) {
        if let reason = readOnlyReason, changesLog(request.command) {
            if case .write = request.command { statistics.writesRejected += 1 }
            return fail(request, address, .unavailable(reason))
        }
        switch request.command {
        case .write(let name, let operation):
            write(operation, to: name, request, address)
        case .get(let name, let window):
            publishOpenBatch(of: name)
            guard let state = existing(name) else {
                return fail(request, address, .unknownCollection(name))
            }
            if let window { return getView(of: state, window, request, address) }
            answer(
                request, address,
                .state(
                    collection: name, epoch: state.epoch, version: state.version, state.document.snapshot, window: nil))
        case .subscribe(let name, let since, let epoch, let window):
            publishOpenBatch(of: name)
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
            publishOpenBatch(of: name)
            guard existing(name) != nil else {
                return fail(request, address, .unknownCollection(name))
            }
            touch(name)
            collections[name] = nil
            droppedCollections = true
            journal(.drop(collection: name))
            outcomes.append(.dropped(collection: name))
            answer(request, address)
        case .list:
            publishAllOpenBatches()
            let rows = collections.values.filter(\.exists).sorted { $0.name < $1.name }.map { state in
                CollectionSummary(
                    name: state.name, version: state.version, sections: state.document.snapshot.sections.count,
                    items: state.document.itemCount)
            }
            outcomes.append(.listing(address, id: request.id, collections: rows))
        case .stats:
            publishAllOpenBatches()
            statistics.collections = collections.values.count { $0.exists }
            statistics.readOnlyReason = readOnlyReason
            outcomes.append(.statistics(address, id: request.id, statistics))
        case .ping, .auth, .unsubscribe:
            // Answered by the loop; accepted here so that the engine can serve any request.
            answer(request, address)
        }
    }

    /// Whether a request would change what the log holds: writes, drops, and a subscription
    /// that creates its collection. Refused while read-only; with a backbone, only a
    /// collection's owner may run them.
    public func changesLog(_ command: Command) -> Bool {
        switch command {
        case .write, .drop: true
        case .subscribe(let name, _, _, let window):
            // An anchor cannot be in a collection that does not exist: that subscribe is refused.
            existing(name) == nil && window?.anchor == nil
        default: false
        }
    }

    /// Marks a collection as existing, logging its creation the first time.
    private func materialize(_ state: CollectionState) {
        guard !state.exists else { return }
        state.exists = true
        journal(.create(collection: state.name, epoch: state.epoch))
    }

    private func journal(_ record: @autoclosure () -> LogRecord) {
        if journals { logRecords.append(record()) }
    }

    /// Everything to log since the last call, in order.
    public func takeLogRecords() -> [LogRecord] {
        logRecords.swapAndClear()
    }

    private func existing(_ name: String) -> CollectionState? {
        guard let state = collections[name], state.exists else { return nil }
        return state
    }

    /// Whether one more collection would pass `limits.collections`.
    private var isAtCollectionLimit: Bool { collections.count >= limits.collections }

    private func state(for name: String) -> CollectionState {
        if let state = collections[name] { return state }
        let state = CollectionState(name: name, epoch: makeEpoch(), historyLimits: historyLimits)
        collections[name] = state
        return state
    }

    private func fail(_ request: Request, _ address: ResponseAddress, _ error: DiffcastError) {
        logger?.debug(
            "request rejected",
            metadata: ["op": "\(request.op)", "code": "\(error.code)", "message": "\(error.message)"])
        outcomes.append(.response(address, Encoded(.failure(id: request.id, op: request.op, error))))
    }

    private func answer(_ request: Request, _ address: ResponseAddress, _ answer: Answer = .done) {
        outcomes.append(.response(address, Encoded(.success(id: request.id, op: request.op, answer))))
    }

    // MARK: - Recovery

    /// A collection as a checkpoint kept it.
    public func restore(collection name: String, epoch: String, version: UInt64, sections: [SectionOutline]) throws {
        try restore(collection: name, epoch: epoch, version: version, sections: sections, history: [])
    }

    /// Restores a collection with its earlier versions (oldest first), for catch-ups.
    package func restore(
        collection name: String, epoch: String, version: UInt64, sections: [SectionOutline],
        history: VersionHistory
    ) throws {
        let state = CollectionState(name: name, epoch: epoch, historyLimits: historyLimits)
        state.document = try Document(restoring: sections)
        state.version = version
        state.exists = true
        for past in history { state.remember(past.snapshot, as: past.version) }
        state.remember(state.document.snapshot, as: version)
        collections[name] = state
    }

    /// Redoes one logged record, as it was done before the restart.
    public func replay(_ record: LogRecord) throws {
        switch record {
        case .create(let name, let epoch):
            let state = CollectionState(name: name, epoch: epoch, historyLimits: historyLimits)
            state.exists = true
            state.remember(state.document.snapshot, as: 0)
            collections[name] = state
        case .drop(let name):
            collections[name] = nil
        case .batch(let name, let version, let writes):
            guard let state = collections[name] else {
                throw RecoveryError.inconsistent("a batch for '\(name)', which does not exist")
            }
            // A logged batch follows the version before it; the history (and a checkpoint made
            // from it) must never hold a version twice (found by the wal_file fuzz target).
            guard version > 0, version - 1 == state.version else {
                throw RecoveryError.inconsistent(
                    "a batch for '\(name)' at version \(version), which does not follow \(state.version)")
            }
            for line in writes { try redo(line, on: state) }
            _ = state.document.takeMarks()
            state.version = version
            state.remember(state.document.snapshot, as: version)
        }
    }

    /// Applies one logged write line again, as it was applied when it was logged.
    private func redo(_ line: [UInt8], on state: CollectionState) throws {
        guard case .write(_, let operation) = try lineParser.parse(line: line).command else {
            throw RecoveryError.inconsistent("a logged line of '\(state.name)' is not a write")
        }
        try state.document.apply(operation)
    }

    /// Every existing collection's state, for a checkpoint.
    public func checkpointEntries() -> [(
        name: String, epoch: String, version: UInt64, snapshot: Snapshot, history: VersionHistory
    )] {
        collections.values.filter(\.exists).sorted { $0.name < $1.name }.map { state in
            let earlier = state.history.filter { $0.version < state.version }
            return (state.name, state.epoch, state.version, state.document.snapshot, earlier)
        }
    }

    public var collectionCount: Int { collections.values.count { $0.exists } }

    /// Whether a collection exists (a subscription to one that does not creates it).
    public func holds(_ name: String) -> Bool { existing(name) != nil }

    /// A collection's epoch and version, when it exists.
    public func position(of name: String) -> (epoch: String, version: UInt64)? {
        existing(name).map { ($0.epoch, $0.version) }
    }

    // MARK: - Following a shared log

    /// Whether a shared-log message can be applied to what this daemon holds: a batch must
    /// follow the collection's current version (so a batch at version 0 never fits).
    public func fits(_ records: [LogRecord]) -> Bool {
        guard case .batch(let name, let version, _) = records.first else { return true }
        return version > 0 && existing(name)?.version == version - 1
    }

    /// Takes a collection's state from a snapshot of the shared log (the messages before it
    /// were cut from the log). Subscribers get one changeset to it; under another epoch the
    /// collection is dropped and made anew.
    public func adopt(_ snapshot: SharedLogSnapshot) throws -> [Outcome] {
        _ = commitLastBatch()
        defer { outcomes = [] }
        let name = snapshot.name
        guard let state = existing(name), state.epoch == snapshot.epoch else {
            if existing(name) != nil { outcomes.append(.dropped(collection: name)) }
            try restore(
                collection: name, epoch: snapshot.epoch, version: snapshot.version, sections: snapshot.sections)
            return outcomes
        }
        guard snapshot.version > state.version else { return [] }
        let document = try Document(restoring: snapshot.sections)
        let changeset = Differ.changeset(from: state.document.snapshot, to: document.snapshot)
        let from = state.version
        let previous = state.document.snapshot
        state.document = document
        state.version = snapshot.version
        let event = Event.changeset(
            collection: name, epoch: state.epoch, from: from, version: state.version, changeset,
            digest: Digest(of: document.snapshot))
        state.remember(document.snapshot, as: state.version)
        outcomes.append(
            .published(
                collection: name, from: from, to: state.version, event: Encoded(event),
                windows: advanceWindows(of: state, from: previous, changeset: changeset)))
        return outcomes
    }

    /// A collection's state as a shared-log snapshot taken at `logSequence`.
    public func snapshotForSharedLog(of name: String, logSequence: UInt64) -> [UInt8]? {
        guard let state = existing(name) else { return nil }
        return SharedLogSnapshot.encode(
            name: name, epoch: state.epoch, version: state.version, logSequence: logSequence,
            snapshot: state.document.snapshot)
    }

    /// Applies records that another daemon appended to the shared log, as that daemon applied
    /// them: the same versions, epochs, digests and events for this daemon's subscribers.
    /// Records that do not fit (a batch for a version this daemon does not hold) are skipped
    /// and logged; they cannot come from a log that is appended only after its expected last
    /// message.
    public func follow(_ records: [LogRecord]) -> [Outcome] {
        _ = commitLastBatch()
        for record in records {
            switch record {
            case .create(let name, let epoch):
                if let state = collections[name], state.exists {
                    guard state.epoch != epoch else { continue }
                    outcomes.append(.dropped(collection: name))
                }
                let state = CollectionState(name: name, epoch: epoch, historyLimits: historyLimits)
                state.exists = true
                state.remember(state.document.snapshot, as: 0)
                collections[name] = state
            case .drop(let name):
                guard collections.removeValue(forKey: name) != nil else { continue }
                droppedCollections = true
                outcomes.append(.dropped(collection: name))
            case .batch(let name, let version, let writes):
                guard let state = existing(name), version > 0, version - 1 == state.version else {
                    logger?.error(
                        "shared log: a batch that does not fit",
                        metadata: ["collection": "\(name)", "version": "\(version)"])
                    continue
                }
                open(state)
                for line in writes {
                    do {
                        try redo(line, on: state)
                    } catch {
                        logger?.error("shared log: a write that does not apply", metadata: ["collection": "\(name)"])
                    }
                }
                publishOpenBatch(of: name)
            }
        }
        logRecords = []
        defer { outcomes = [] }
        return outcomes
    }

    /// The counters so far (for metrics).
    public var currentStatistics: ApplyStatistics { statistics }

    // MARK: - Writes

    private func write(_ operation: WriteOperation, to name: String, _ request: Request, _ address: ResponseAddress) {
        let found = collections[name]
        if found == nil && isAtCollectionLimit {
            statistics.writesRejected += 1
            return fail(request, address, .limitExceeded("max_collections (\(limits.collections)) collections exist"))
        }
        touch(name)
        let state = found ?? state(for: name)
        let most = operation.mostItemsAfter(current: state.document.itemCount)
        if most > limits.itemsPerCollection {
            statistics.writesRejected += 1
            if !state.exists && state.openBatch == nil { collections[name] = nil }
            return fail(
                request, address,
                .limitExceeded("max_items_per_collection (\(limits.itemsPerCollection)): this write could make \(most)")
            )
        }
        let opensBatch = state.openBatch == nil
        if opensBatch { open(state) }
        do {
            try state.document.apply(operation)
        } catch {
            statistics.writesRejected += 1
            if opensBatch {
                state.openBatch = nil
                openBatches.removeLast()
                if !state.exists { collections[name] = nil }
            }
            return fail(request, address, state.exists ? error : .inMissingCollection(name, error))
        }
        statistics.writesApplied += 1
        materialize(state)
        // Appended in place: copying the batch out and back would make a burst quadratic.
        state.openBatch?.acknowledgements.append(
            OpenBatch.Acknowledgement(address: address, id: request.id, op: request.op, line: request.line))
    }

    /// Starts collecting the writes to `state` into one version.
    private func open(_ state: CollectionState) {
        state.openBatch = OpenBatch(base: state.document.snapshot)
        openBatches.append(state)
    }

    /// Publishes every open batch, in the order of the collections' names.
    private func publishAllOpenBatches() {
        guard !openBatches.isEmpty else { return }
        for name in openBatches.map(\.name).sorted() {
            publishOpenBatch(of: name)
        }
    }

    /// Diffs the open batch of a collection once, publishes it as the next version when
    /// anything changed, then acknowledges every write in it with that version.
    private func publishOpenBatch(of name: String) {
        guard let state = collections[name], let batch = state.openBatch else { return }
        state.openBatch = nil
        openBatches.removeAll { $0 === state }
        let changeset = state.document.changeset(since: batch.base)
        if !changeset.isEmpty {
            if state.history.isEmpty {
                state.remember(batch.base, as: state.version)
            }
            let from = state.version
            state.version += 1
            statistics.versionsPublished += 1
            let event = Event.changeset(
                collection: name, epoch: state.epoch, from: from, version: state.version, changeset,
                digest: Digest(of: state.document.snapshot))
            state.remember(state.document.snapshot, as: state.version)
            journal(.batch(collection: name, version: state.version, writes: batch.acknowledgements.map(\.line)))
            outcomes.append(
                .published(
                    collection: name, from: from, to: state.version, event: Encoded(event),
                    windows: advanceWindows(of: state, from: batch.base, changeset: changeset)))
        }
        let mark = VersionMark(collection: name, version: state.version)
        // The writes of a batch share their version, so writes without an `id` and with the same
        // op (a feed's) get the same bytes: encoded once and shared.
        var lastShared: (op: String, response: Encoded<Response>)?
        for write in batch.acknowledgements {
            if write.id == nil, let shared = lastShared, shared.op == write.op {
                outcomes.append(.acknowledged(write.address, shared.response, mark))
                continue
            }
            let response = Encoded(Response.success(id: write.id, op: write.op, .version(mark.version)))
            if write.id == nil { lastShared = (write.op, response) }
            outcomes.append(.acknowledged(write.address, response, mark))
        }
    }

    // MARK: - Subscriptions

    private func subscribe(
        _ name: String, since: UInt64?, epoch: String?, _ request: Request, _ address: ResponseAddress
    ) {
        touch(name)
        let state = state(for: name)
        materialize(state)
        state.windows.leave(address.connection)
        let event = catchUpEvent(state, since: epoch == nil || epoch == state.epoch ? since : nil)
        outcomes.append(
            .subscribed(
                address, collection: name, version: state.version, event: event.map(Encoded.init),
                response: subscribedResponse(to: request, of: state)))
    }

    private func catchUp(connection: ConnectionID, name: String, since: UInt64, window range: WindowRange?) {
        guard let state = existing(name) else { return }
        guard let range else {
            outcomes.append(
                .caughtUp(
                    connection: connection, collection: name, version: state.version,
                    event: catchUpEvent(state, since: since).map(Encoded.init)))
            return
        }
        // A windowed subscriber holds the view of `range` at `since`: one changeset from it to its
        // window's view now (none when they are the same), or the view when `since` is forgotten.
        guard let group = state.windows.group(of: connection), let tracker = state.windows.tracker(group) else {
            return
        }
        var event: Event?
        if let old = state.snapshot(at: since)?.view(range) {
            let changeset = WindowTracker.changeset(from: old, to: tracker.view)
            if !changeset.isEmpty {
                event = .changeset(
                    collection: name, epoch: state.epoch, from: since, version: state.version, changeset,
                    digest: Digest(of: tracker.view), window: tracker.place)
            }
        } else {
            event = .snapshot(
                collection: name, epoch: state.epoch, version: state.version, tracker.view, window: tracker.place)
        }
        outcomes.append(
            .caughtUp(
                connection: connection, collection: name, version: state.version, event: event.map(Encoded.init),
                window: tracker.range))
    }

    /// Nothing when `since` is current, one changeset from `since` when its snapshot is still
    /// kept, else the whole state as a snapshot event.
    private func catchUpEvent(_ state: CollectionState, since: UInt64?) -> Event? {
        let current = state.document.snapshot
        if let since, since == state.version { return nil }
        if let since, since < state.version, let old = state.snapshot(at: since) {
            return .changeset(
                collection: state.name, epoch: state.epoch, from: since, version: state.version,
                Differ.changeset(from: old, to: current), digest: Digest(of: current))
        }
        return .snapshot(collection: state.name, epoch: state.epoch, version: state.version, current)
    }

    // MARK: - Windows

    /// Subscribes with a window (SPEC.md "Windows"): the subscriber joins the group showing that
    /// window and is sent its view. An anchor that is not in the collection is refused, and
    /// then nothing changes: no collection is made, the connection's subscription goes on.
    private func subscribe(_ name: String, window: Window, _ request: Request, _ address: ResponseAddress) {
        let tracker: WindowTracker
        do {
            tracker = try WindowTracker(window, over: existing(name)?.document ?? Document())
        } catch {
            return fail(request, address, existing(name) == nil ? .inMissingCollection(name, error) : error)
        }
        touch(name)
        let state = state(for: name)
        materialize(state)
        var join: WindowJoin?
        var shown = tracker
        if address.connection != SharedLogApplier.forwardedConnection {
            // A subscribe another daemon forwarded only makes the collection; its subscriber is there.
            let (group, groupTracker) = state.windows.join(address.connection, tracker, nextID: nextWindowGroup)
            join = WindowJoin(group: group, range: groupTracker.range)
            shown = groupTracker
        }
        let event = Event.snapshot(
            collection: name, epoch: state.epoch, version: state.version, shown.view, window: shown.place)
        outcomes.append(
            .subscribed(
                address, collection: name, version: state.version, event: Encoded(event),
                response: subscribedResponse(to: request, of: state), window: join))
    }

    /// The `window` op: moves the connection's windowed subscription to another window, with one
    /// changeset from its old view to the new one (a subscriber that is behind gets a catch-up
    /// instead, from the loop).
    private func rewindow(_ name: String, _ window: Window, _ request: Request, _ address: ResponseAddress) {
        guard let state = existing(name), let group = state.windows.group(of: address.connection),
            let old = state.windows.tracker(group)
        else {
            return fail(
                request, address,
                .invalidArgument(
                    "this connection has no windowed subscription to '\(name)': subscribe with a window first"))
        }
        let tracker: WindowTracker
        do {
            tracker = try WindowTracker(window, over: state.document)
        } catch {
            return fail(request, address, error)
        }
        let (newGroup, shown) = state.windows.join(address.connection, tracker, nextID: nextWindowGroup)
        let changeset = WindowTracker.changeset(from: old.view, to: shown.view)
        let event =
            changeset.isEmpty
            ? nil
            : WindowEvent(
                collection: name, epoch: state.epoch, version: state.version, changeset, place: shown.place,
                digest: Digest(of: shown.view))
        outcomes.append(
            .rewindowed(
                address, collection: name, version: state.version,
                window: WindowJoin(group: newGroup, range: shown.range),
                event: event, response: Encoded(.success(id: request.id, op: request.op, .version(state.version)))))
    }

    /// `get` with a window: the view at the current version, with its place and digest.
    private func getView(of state: CollectionState, _ window: Window, _ request: Request, _ address: ResponseAddress) {
        let tracker: WindowTracker
        do {
            tracker = try WindowTracker(window, over: state.document)
        } catch {
            return fail(request, address, error)
        }
        answer(
            request, address,
            .state(
                collection: state.name, epoch: state.epoch, version: state.version, tracker.view,
                window: tracker.place))
    }

    /// Moves a collection's windows on to the version just published (whose previous state was
    /// `previous`); the events of the windows whose view changed.
    private func advanceWindows(
        of state: CollectionState, from previous: Snapshot, changeset: Changeset
    ) -> [WindowDelivery] {
        guard !state.windows.isEmpty else { return [] }
        let changed = state.windows.advance(
            from: previous, to: state.document, marks: WindowMarks(of: changeset, in: state.document.snapshot))
        return changed.map { group, tracker, windowChangeset in
            WindowDelivery(
                group: group,
                event: WindowEvent(
                    collection: state.name, epoch: state.epoch, version: state.version, windowChangeset,
                    place: tracker.place, digest: Digest(of: tracker.view)),
                range: tracker.range)
        }
    }

    private var lastWindowGroup: WindowGroupID = 0

    private func nextWindowGroup() -> WindowGroupID {
        lastWindowGroup += 1
        return lastWindowGroup
    }

    private func subscribedResponse(to request: Request, of state: CollectionState) -> Encoded<Response> {
        Encoded(
            .success(
                id: request.id, op: request.op,
                .subscribed(collection: state.name, epoch: state.epoch, version: state.version)))
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

import DiffcastCore
import DiffcastWire

/// The single source of truth for every collection. It applies requests in arrival order,
/// coalesces the writes to one collection that arrive together into one changeset, and says
/// what to send as `Outcome`s. It has no threads and no sockets: `ApplyQueue` runs it.
public final class ApplyEngine {
    private var collections: [String: CollectionState] = [:]
    private var openBatches: [String: OpenBatch] = [:]
    private var statistics = ApplyStatistics()
    private let historyLimits: HistoryLimits
    private let makeEpoch: () -> String
    private var outcomes: [Outcome] = []

    /// Writes to one collection waiting to be published together.
    private struct OpenBatch {
        let base: Snapshot
        var acknowledgements: [(ResponseAddress, Request)] = []
    }

    public init(
        historyLimits: HistoryLimits = HistoryLimits(), makeEpoch: @escaping () -> String = ApplyEngine.randomEpoch
    ) {
        self.historyLimits = historyLimits
        self.makeEpoch = makeEpoch
    }

    public static func randomEpoch() -> String {
        var generator = SystemRandomNumberGenerator()
        let value = generator.next() as UInt64
        let hex = String(value, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// Processes jobs in order; writes to a collection stay open until something else needs
    /// that collection or the jobs run out, then publish as one version.
    public func process(_ jobs: [Job]) -> [Outcome] {
        statistics.batches += 1
        for job in jobs {
            switch job {
            case .request(let request, let address):
                handle(request, address)
            case .catchUp(let connection, let name, let since):
                publishOpenBatch(of: name)
                catchUp(connection: connection, name: name, since: since)
            }
        }
        for name in openBatches.keys.sorted() {
            publishOpenBatch(of: name)
        }
        defer { outcomes = [] }
        return outcomes
    }

    private func handle(_ request: Request, _ address: ResponseAddress) {
        switch request.command {
        case .write(let name, let operation):
            write(operation, to: name, request, address)
        case .get(let name):
            publishOpenBatch(of: name)
            guard let state = existing(name) else {
                return fail(request, address, .unknownCollection(name))
            }
            let bytes = WireEncoder.success(id: request.id, op: request.op) { output in
                output.appendRaw(",\"collection\":")
                output.append(string: name)
                WireEncoder.appendState(
                    of: state.document.snapshot, version: state.version, epoch: state.epoch, into: &output)
            }
            outcomes.append(.response(address, SharedBytes(bytes)))
        case .subscribe(let name, let since, let epoch):
            publishOpenBatch(of: name)
            subscribe(name, since: since, epoch: epoch, request, address)
        case .drop(let name):
            publishOpenBatch(of: name)
            guard existing(name) != nil else {
                return fail(request, address, .unknownCollection(name))
            }
            collections[name] = nil
            outcomes.append(.dropped(collection: name))
            outcomes.append(.response(address, SharedBytes(WireEncoder.success(id: request.id, op: request.op))))
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
            outcomes.append(.statistics(address, id: request.id, statistics))
        case .ping, .unsubscribe:
            // Answered by the loop; accepted here so that the engine can serve any request.
            outcomes.append(.response(address, SharedBytes(WireEncoder.success(id: request.id, op: request.op))))
        }
    }

    private func existing(_ name: String) -> CollectionState? {
        guard let state = collections[name], state.exists else { return nil }
        return state
    }

    private func state(for name: String) -> CollectionState {
        if let state = collections[name] { return state }
        let state = CollectionState(name: name, epoch: makeEpoch(), historyLimits: historyLimits)
        collections[name] = state
        return state
    }

    private func fail(_ request: Request, _ address: ResponseAddress, _ error: DiffcastError) {
        outcomes.append(
            .response(address, SharedBytes(WireEncoder.failure(id: request.id, op: request.op, error: error))))
    }

    // MARK: - Writes

    private func write(_ operation: WriteOperation, to name: String, _ request: Request, _ address: ResponseAddress) {
        let state = state(for: name)
        var batch = openBatches[name] ?? OpenBatch(base: state.document.snapshot)
        do {
            try state.document.apply(operation)
        } catch {
            statistics.writesRejected += 1
            if !state.exists && openBatches[name] == nil {
                collections[name] = nil
            }
            return fail(request, address, error)
        }
        statistics.writesApplied += 1
        state.exists = true
        batch.acknowledgements.append((address, request))
        openBatches[name] = batch
    }

    private func publishAllOpenBatches() {
        for name in openBatches.keys.sorted() {
            publishOpenBatch(of: name)
        }
    }

    /// Diffs the open batch of a collection once, publishes it as the next version when
    /// anything changed, then acknowledges every write in it with that version.
    private func publishOpenBatch(of name: String) {
        guard let batch = openBatches.removeValue(forKey: name), let state = collections[name] else { return }
        let changeset = state.document.changeset(since: batch.base)
        if !changeset.isEmpty {
            if state.history.isEmpty {
                state.remember(batch.base, as: state.version)
            }
            let from = state.version
            state.version += 1
            statistics.versionsPublished += 1
            let event = WireEncoder.changesetEvent(
                collection: name, epoch: state.epoch, from: from, to: state.version, changeset: changeset,
                digest: Digest(of: state.document.snapshot))
            state.remember(state.document.snapshot, as: state.version)
            outcomes.append(.published(collection: name, from: from, to: state.version, event: SharedBytes(event)))
        }
        let version = state.version
        for (address, request) in batch.acknowledgements {
            let bytes = WireEncoder.success(id: request.id, op: request.op) { output in
                output.appendRaw(",\"version\":")
                output.append(version)
            }
            outcomes.append(.response(address, SharedBytes(bytes)))
        }
    }

    // MARK: - Subscriptions

    private func subscribe(
        _ name: String, since: UInt64?, epoch: String?, _ request: Request, _ address: ResponseAddress
    ) {
        let state = state(for: name)
        state.exists = true
        let event = catchUpEvent(state, since: epoch == nil || epoch == state.epoch ? since : nil)
        let response = WireEncoder.success(id: request.id, op: request.op) { output in
            output.appendRaw(",\"collection\":")
            output.append(string: name)
            output.appendRaw(",\"epoch\":")
            output.append(string: state.epoch)
            output.appendRaw(",\"version\":")
            output.append(state.version)
        }
        outcomes.append(
            .subscribed(
                address, collection: name, version: state.version, event: event.map(SharedBytes.init),
                response: SharedBytes(response)))
    }

    private func catchUp(connection: ConnectionID, name: String, since: UInt64) {
        guard let state = existing(name) else { return }
        let event = catchUpEvent(state, since: since) ?? []
        outcomes.append(
            .caughtUp(connection: connection, collection: name, version: state.version, event: SharedBytes(event)))
    }

    /// Nothing when `since` is current, one changeset from `since` when its snapshot is still
    /// kept, else the whole state as a snapshot event.
    private func catchUpEvent(_ state: CollectionState, since: UInt64?) -> [UInt8]? {
        let current = state.document.snapshot
        if let since, since == state.version { return nil }
        if let since, since < state.version, let old = state.snapshot(at: since) {
            let changeset = Differ.changeset(from: old, to: current)
            return WireEncoder.changesetEvent(
                collection: state.name, epoch: state.epoch, from: since, to: state.version, changeset: changeset,
                digest: Digest(of: current))
        }
        return WireEncoder.snapshotEvent(
            collection: state.name, epoch: state.epoch, version: state.version, snapshot: current)
    }
}

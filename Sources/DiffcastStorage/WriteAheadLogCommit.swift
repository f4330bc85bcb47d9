import DiffcastEngine
import Dispatch
import Logging

/// Batches made durable in a state directory before any of their outcomes leaves: the engine
/// applies a batch, its log records go to the write-ahead log in one append (group commit), and
/// only then is it final.
///
/// A disk that refuses the append (full, or failing) does not stop the daemon: the batch is
/// undone in memory and applied again with writes answered `unavailable`, and the daemon stays
/// read-only, serving reads and subscribers from the last durable state, until a probe every
/// second (or a write) finds room again. Only a log that cannot even be cut back to its last good
/// record is fatal (`onFailure`).
///
/// Used on the apply thread alone, where its timers fire too: that makes it safe to hand to
/// their closures.
public final class WriteAheadLogCommit: BatchCommit, @unchecked Sendable {
    private let engine: ApplyEngine
    private let store: StateStore
    private let onFailure: @Sendable (Error) -> Void
    private var deliver: (@Sendable ([Outcome]) -> Void)?
    private var queue: DispatchQueue?
    /// Syncs the log of the `interval` policy.
    private var syncTimer: (any DispatchSourceTimer)?
    /// While writes are refused: checks whether the disk takes them again.
    private var probeTimer: (any DispatchSourceTimer)?

    private static let probeInterval = DispatchTimeInterval.seconds(1)

    public init(engine: ApplyEngine, store: StateStore, onFailure: @escaping @Sendable (Error) -> Void) {
        self.engine = engine
        self.store = store
        self.onFailure = onFailure
        engine.keepsLogRecords = true
    }

    public var keepsLogRecords: Bool { true }

    public func start(
        on queue: DispatchQueue, deliver: @escaping @Sendable ([Outcome]) -> Void,
        recordSyncDuration: (@Sendable (Duration) -> Void)?
    ) {
        self.queue = queue
        self.deliver = deliver
        store.recordSyncDuration = recordSyncDuration
        guard store.options.sync == .interval else { return }
        let timer = DispatchSource.makeTimerSource(queue: queue)
        let interval = DispatchTimeInterval.milliseconds(store.options.syncIntervalMilliseconds)
        timer.schedule(deadline: .now() + interval, repeating: interval)
        timer.setEventHandler { [weak self] in
            guard let self else { return }
            do { try self.store.syncIfDue() } catch { self.onFailure(error) }
        }
        timer.resume()
        syncTimer = timer
    }

    public func commit(_ jobs: [Job]) -> [Outcome] {
        guard !jobs.isEmpty else { return [] }
        var pending: [Outcome] = []
        if engine.readOnlyReason != nil, jobs.contains(where: \.isWrite), store.hasRoom() {
            leaveReadOnly(outcomes: &pending)
        }
        var outcomes = pending + engine.process(jobs)
        do {
            let records = engine.takeLogRecords()
            try store.append(records)
            engine.finalizeLastBatch()
            // Only records that really reached the disk show that it takes writes again.
            if !records.isEmpty, engine.readOnlyReason != nil { leaveReadOnly(outcomes: &outcomes) }
        } catch let error as StorageUnavailable {
            // Nothing of this batch is in the log: undo it in memory and answer its writes
            // `unavailable`; reads and subscribers are served from the last durable state.
            engine.rollBackLastBatch()
            let wasWritable = engine.readOnlyReason == nil
            engine.readOnlyReason = "the state directory cannot take writes (\(error)); retrying"
            outcomes = pending + engine.process(jobs)
            _ = engine.takeLogRecords()
            engine.finalizeLastBatch()
            if wasWritable { enterReadOnly(outcomes: &outcomes) }
        } catch {
            // The log could not even be cut back to its last good record: stop.
            onFailure(error)
            return []
        }
        for (index, outcome) in outcomes.enumerated() {
            if case .statistics(let address, let id, var statistics) = outcome {
                statistics.logSyncs = store.syncs
                outcomes[index] = .statistics(address, id: id, statistics)
            }
        }
        if store.wantsCheckpoint {
            do {
                try store.checkpoint(engine)
            } catch {
                store.logger.warning("checkpoint failed; the log keeps everything, retrying later: \(error)")
            }
        }
        return outcomes
    }

    /// Folds the log into a checkpoint, so that the next start is quick.
    public func finish() {
        syncTimer?.cancel()
        probeTimer?.cancel()
        do { try store.checkpoint(engine) } catch { onFailure(error) }
    }

    /// Starts trying, every `probeInterval`, whether the disk takes writes again.
    private func enterReadOnly(outcomes: inout [Outcome]) {
        store.logger.error("writes refused: \(engine.readOnlyReason ?? "")")
        outcomes.append(.storage(readOnlyReason: engine.readOnlyReason))
        guard let queue else { return }
        let timer = DispatchSource.makeTimerSource(queue: queue)
        timer.schedule(deadline: .now() + Self.probeInterval, repeating: Self.probeInterval)
        timer.setEventHandler { [weak self] in
            guard let self, self.store.hasRoom() else { return }
            var outcomes: [Outcome] = []
            self.leaveReadOnly(outcomes: &outcomes)
            self.deliver?(outcomes)
        }
        timer.resume()
        probeTimer = timer
    }

    private func leaveReadOnly(outcomes: inout [Outcome]) {
        probeTimer?.cancel()
        probeTimer = nil
        guard engine.readOnlyReason != nil else { return }
        engine.readOnlyReason = nil
        store.logger.notice("the state directory takes writes again")
        outcomes.append(.storage(readOnlyReason: nil))
    }
}

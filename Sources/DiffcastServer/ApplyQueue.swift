import CSystem
import DiffcastCore
import DiffcastEngine
import DiffcastStorage
import Dispatch
import Logging

/// The one serial queue where every write is applied. Jobs that arrive while a batch is being
/// applied become the next batch, so bursts coalesce by themselves under load while a lone
/// write is applied at once. With a state store, a batch's log records are made durable before
/// its outcomes go back through `deliver` (called on the worker thread): group commit.
///
/// Without a state store or a backbone, a small batch of item writes from clients that wait for
/// their answers, finding the queue idle, is applied at once on the submitting thread (the
/// loop): handing it to the worker and its outcomes back costs two thread wake-ups on the path
/// every answer waits on. A client that pipelines thousands of writes is served by the worker,
/// so that the loop parses its next read meanwhile (see README, "Performance"). Batches still
/// run one at a time and in order; only the thread differs.
public final class ApplyQueue: Sendable {
    private let context: ApplyingContext
    private let onPersistenceFailure: @Sendable (Error) -> Void
    private let inbox: Locked<Inbox>
    private let worker = DispatchQueue(label: "diffcast.apply")
    private let deliver: @Sendable ([Outcome]) -> Void
    private let coalesceWindow: DispatchTimeInterval?
    private let metrics: ServerMetrics?

    private struct Inbox {
        var jobs: [Job] = []
        /// When each job was submitted (for the acknowledgement-latency histogram).
        var submitted: [ContinuousClock.Instant] = []
        var drainScheduled = false
        /// A batch is being applied, on the worker or on a submitting thread.
        var isApplying = false
        /// Whether small batches may be applied on the submitting thread.
        var mayApplyInline: Bool
    }

    /// The engine and the store are touched by one thread at a time, which makes this box safe
    /// to share: on `worker`, or on the submitting thread that applies a small batch inline. It
    /// does so only when no drain is scheduled or running (`inbox.isApplying`) and only without a
    /// store or a backbone, where that thread (the loop) is the only one that submits: no drain
    /// can start until it has finished.
    private final class ApplyingContext: @unchecked Sendable {
        let engine: ApplyEngine
        let store: StateStore?
        /// Syncs the log of the `interval` policy; lives as long as the queue.
        var syncTimer: (any DispatchSourceTimer)?
        /// While writes are refused: checks whether the disk takes them again.
        var probeTimer: (any DispatchSourceTimer)?
        /// The engine's counters as last added to the metrics.
        var reportedStatistics = ApplyStatistics()
        /// With a backbone: the shared log's side of every batch.
        var sharedLog: SharedLogApplier?
        init(_ engine: ApplyEngine, _ store: StateStore?) {
            self.engine = engine
            self.store = store
        }
    }

    public init(
        engine: ApplyEngine, store: StateStore? = nil, coalesceWindowMilliseconds: Int = 0,
        metrics: ServerMetrics? = nil, onPersistenceFailure: @escaping @Sendable (Error) -> Void = { _ in },
        deliver: @escaping @Sendable ([Outcome]) -> Void
    ) {
        engine.journals = store != nil
        let box = ApplyingContext(engine, store)
        self.context = box
        inbox = Locked(Inbox(mayApplyInline: store == nil && coalesceWindowMilliseconds <= 0))
        self.deliver = deliver
        self.onPersistenceFailure = onPersistenceFailure
        self.coalesceWindow = coalesceWindowMilliseconds > 0 ? .milliseconds(coalesceWindowMilliseconds) : nil
        self.metrics = metrics
        if let metrics { store?.recordSyncDuration = { metrics.logSyncSeconds.record($0) } }
        if let store, store.options.sync == .interval {
            let timer = DispatchSource.makeTimerSource(queue: worker)
            let interval = DispatchTimeInterval.milliseconds(store.options.syncIntervalMilliseconds)
            timer.schedule(deadline: .now() + interval, repeating: interval)
            timer.setEventHandler {
                do { try box.store?.syncIfDue() } catch { onPersistenceFailure(error) }
            }
            timer.resume()
            box.syncTimer = timer
        }
    }

    /// Joins the daemons of a backbone: follows the shared log and applies it through its
    /// current end before returning, so the daemon serves only once it holds what the others
    /// hold. Call before the first job. The owner of a collection snapshots it every
    /// `snapshotEvery` log messages, which bounds what a joining daemon replays.
    public func attach(_ backbone: Backbone, snapshotEvery: Int, logger: Logger) throws {
        let applier = SharedLogApplier(
            engine: context.engine, backbone: backbone, node: backbone.node, snapshotEvery: snapshotEvery,
            logger: logger)
        inbox.withLock { $0.mayApplyInline = false }
        let start = try backbone.start(wake: { [weak self] in self?.wake() })
        let outcomes = worker.sync {
            context.engine.journals = true
            context.sharedLog = applier
            return applier.join(start)
        }
        deliver(outcomes)
    }

    /// Schedules a drain with no new jobs, at once: something arrived from the backbone.
    private func wake() {
        enqueue([], after: nil)
    }

    /// Waits for the jobs in flight, then folds the log into a checkpoint so the next start is
    /// quick. Call once, when the daemon stops.
    public func finish() {
        context.syncTimer?.cancel()
        context.probeTimer?.cancel()
        worker.sync {
            do {
                if let store = context.store { try store.checkpoint(context.engine) }
            } catch {
                onPersistenceFailure(error)
            }
            context.sharedLog?.stop()
            context.sharedLog = nil
        }
    }

    /// Queues jobs in order; safe from any thread. With `mayApplyHere`, small item writes that
    /// find the queue idle are applied at once on this thread and their outcomes returned, not
    /// delivered: the caller must then take what `deliver` was given before, and then these.
    public func submit(_ jobs: [Job], mayApplyHere: Bool = false) -> [Outcome]? {
        guard !jobs.isEmpty else { return nil }
        let inline =
            mayApplyHere && jobs.allSatisfy(\.isSmallItemWrite)
            && jobs.reduce(0, { $0 + $1.requestBytes }) <= Self.inlineBytes
            && inbox.withLock { inbox in
                guard inbox.mayApplyInline, !inbox.drainScheduled, !inbox.isApplying, inbox.jobs.isEmpty else {
                    return false
                }
                inbox.isApplying = true
                return true
            }
        guard inline else {
            enqueue(jobs, after: coalesceWindow)
            return nil
        }
        defer { inbox.withLock { $0.isApplying = false } }
        let started = ContinuousClock.now
        let outcomes = processInMemory(jobs)
        if let metrics {
            record(jobs, submitted: Array(repeating: started, count: jobs.count), started: started, into: metrics)
        }
        return outcomes
    }

    /// Adds jobs to the inbox and schedules a drain (after `window`) unless one is scheduled.
    private func enqueue(_ jobs: [Job], after window: DispatchTimeInterval?) {
        let now = ContinuousClock.now
        let mustSchedule = inbox.withLock { inbox in
            inbox.jobs.append(contentsOf: jobs)
            inbox.submitted.append(contentsOf: repeatElement(now, count: jobs.count))
            defer { inbox.drainScheduled = true }
            return !inbox.drainScheduled
        }
        guard mustSchedule else { return }
        if let window {
            worker.asyncAfter(deadline: .now() + window) { self.drain() }
        } else {
            worker.async { self.drain() }
        }
    }

    /// Waits until every job submitted so far has been applied and delivered.
    public func waitUntilIdle() {
        worker.sync {}
    }

    private func drain() {
        let (jobs, submitted) = inbox.withLock { inbox in
            inbox.drainScheduled = false
            inbox.isApplying = true
            return (inbox.jobs.swapAndClear(), inbox.submitted.swapAndClear())
        }
        defer { inbox.withLock { $0.isApplying = false } }
        let started = ContinuousClock.now
        if let sharedLog = context.sharedLog {
            defer { if let metrics { record(jobs, submitted: submitted, started: started, into: metrics) } }
            return deliver(sharedLog.run(jobs))
        }
        guard !jobs.isEmpty else { return }
        defer { if let metrics { record(jobs, submitted: submitted, started: started, into: metrics) } }
        let engine = self.context.engine
        var pending: [Outcome] = []
        if engine.readOnlyReason != nil, jobs.contains(where: \.isWrite), self.context.store?.hasRoom() == true {
            leaveReadOnly(outcomes: &pending)
        }
        guard let store = self.context.store else {
            return deliver(pending + processInMemory(jobs))
        }
        var outcomes = pending + engine.process(jobs)
        do {
            let records = engine.takeLogRecords()
            try store.append(records)
            commit()
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
            commit()
            if wasWritable { enterReadOnly(outcomes: &outcomes) }
        } catch {
            // The log could not even be cut back to its last good record: stop.
            onPersistenceFailure(error)
            return
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
        deliver(outcomes)
    }

    /// Starts trying, every `probeInterval`, whether the disk takes writes again.
    private func enterReadOnly(outcomes: inout [Outcome]) {
        let context = self.context
        context.store?.logger.error("writes refused: \(context.engine.readOnlyReason ?? "")")
        outcomes.append(.storage(readOnlyReason: context.engine.readOnlyReason))
        let timer = DispatchSource.makeTimerSource(queue: worker)
        timer.schedule(deadline: .now() + Self.probeInterval, repeating: Self.probeInterval)
        timer.setEventHandler { [weak self] in
            guard let self, context.store?.hasRoom() == true else { return }
            var outcomes: [Outcome] = []
            self.leaveReadOnly(outcomes: &outcomes)
            self.deliver(outcomes)
        }
        timer.resume()
        context.probeTimer = timer
    }

    /// Applies jobs with no state store: nothing to log, so the batch is final at once.
    private func processInMemory(_ jobs: [Job]) -> [Outcome] {
        let outcomes = context.engine.process(jobs)
        _ = context.engine.takeLogRecords()
        commit()
        return outcomes
    }

    /// The batch is final: forget how to undo it, and after drops give the freed memory back.
    private func commit() {
        if context.engine.commitLastBatch() { dc_release_free_memory() }
    }

    private func leaveReadOnly(outcomes: inout [Outcome]) {
        context.probeTimer?.cancel()
        context.probeTimer = nil
        guard context.engine.readOnlyReason != nil else { return }
        context.engine.readOnlyReason = nil
        context.store?.logger.notice("the state directory takes writes again")
        outcomes.append(.storage(readOnlyReason: nil))
    }

    private static let probeInterval = DispatchTimeInterval.seconds(1)

    /// The most request bytes applied on the submitting thread, so that a batch applied there
    /// holds the loop up for little longer than parsing it did.
    private static let inlineBytes = 64 * 1024

    /// After a batch's outcomes are final: its latency, each write's wait, the counters' growth.
    private func record(
        _ jobs: [Job], submitted: [ContinuousClock.Instant], started: ContinuousClock.Instant,
        into metrics: ServerMetrics
    ) {
        let now = ContinuousClock.now
        metrics.applyBatchSeconds.record(now - started)
        for (job, time) in zip(jobs, submitted) where job.isWrite {
            metrics.writeAcknowledgementSeconds.record(now - time)
        }
        let statistics = context.engine.currentStatistics
        metrics.record(statistics, since: context.reportedStatistics)
        context.reportedStatistics = statistics
        metrics.collections.set(Int64(context.engine.collectionCount))
    }
}

extension Job {
    /// A write that names items: applying it costs about what its request holds, whatever the
    /// collection holds.
    var isSmallItemWrite: Bool {
        guard case .request(let request, _) = self else { return false }
        // Matched without binding, so the command is looked at where it is, not copied.
        switch request.command {
        case .write(_, .appendItems), .write(_, .insertItems), .write(_, .updateItems), .write(_, .deleteItems),
            .write(_, .moveItem), .write(_, .reloadItems), .write(_, .reconfigureItems):
            return true
        default:
            return false
        }
    }

    /// The length of the request's line; 0 for other jobs.
    var requestBytes: Int {
        guard case .request(let request, _) = self else { return 0 }
        return request.lineLength
    }

    var isWrite: Bool {
        guard case .request(let request, _) = self else { return false }
        switch request.command {
        case .write, .drop: return true
        default: return false
        }
    }
}

import DiffcastCore
import DiffcastEngine
import Dispatch
import Logging

/// The one serial queue where every write is applied. Jobs that arrive while a batch is being
/// applied become the next batch, so bursts coalesce by themselves under load while a lone
/// write is applied at once. The queue only schedules: each batch goes, in order and one at a
/// time, to the queue's `BatchCommit` (in memory, a state directory's write-ahead log, or a
/// backbone's shared log), which applies it and makes it final, and its outcomes go back
/// through `deliver` (called on the worker thread).
///
/// When batches are final as soon as they are applied (in memory alone), a small batch of item
/// writes from clients that wait for their answers, finding the queue idle, is applied at once
/// on the submitting thread (the loop): handing it to the worker and its outcomes back costs two
/// thread wake-ups on the path every answer waits on. A client that pipelines thousands of
/// writes is served by the worker, so that the loop parses its next read meanwhile (see README,
/// "Performance"). Batches still run one at a time and in order; only the thread differs.
public final class ApplyQueue: Sendable {
    private let context: ApplyingContext
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

    /// The engine and the commit are touched by one thread at a time, which makes this box safe
    /// to share: on `worker`, or on the submitting thread that applies a small batch inline. It
    /// does so only when no drain is scheduled or running (`inbox.isApplying`) and only when
    /// batches are final once applied, where that thread (the loop) is the only one that
    /// submits: no drain can start until it has finished.
    private final class ApplyingContext: @unchecked Sendable {
        let engine: ApplyEngine
        /// Replaced once, by the shared log's, when the daemon joins a backbone (`attach`).
        var commit: any BatchCommit
        /// The engine's counters as last added to the metrics.
        var reportedStatistics = ApplyStatistics()
        init(_ engine: ApplyEngine, _ commit: any BatchCommit) {
            self.engine = engine
            self.commit = commit
        }
    }

    /// `commit` makes each batch final; by default, in memory.
    public init(
        engine: ApplyEngine, commit: (any BatchCommit)? = nil, coalesceWindowMilliseconds: Int = 0,
        metrics: ServerMetrics? = nil, deliver: @escaping @Sendable ([Outcome]) -> Void
    ) {
        let commit = commit ?? InMemoryCommit(engine: engine)
        self.context = ApplyingContext(engine, commit)
        inbox = Locked(Inbox(mayApplyInline: !commit.keepsLogRecords && coalesceWindowMilliseconds <= 0))
        self.deliver = deliver
        self.coalesceWindow = coalesceWindowMilliseconds > 0 ? .milliseconds(coalesceWindowMilliseconds) : nil
        self.metrics = metrics
        var recordSyncDuration: (@Sendable (Duration) -> Void)?
        if let metrics { recordSyncDuration = { metrics.logSyncSeconds.record($0) } }
        commit.start(on: worker, deliver: deliver, recordSyncDuration: recordSyncDuration)
    }

    /// Joins the daemons of a backbone: follows the shared log and applies it through its
    /// current end before returning, so the daemon serves only once it holds what the others
    /// hold; from then on the shared log makes every batch final. Call before the first job.
    /// The owner of a collection snapshots it every `snapshotEvery` log messages, which bounds
    /// what a joining daemon replays.
    public func attach(_ backbone: Backbone, snapshotEvery: Int, logger: Logger) throws {
        let applier = SharedLogApplier(
            engine: context.engine, backbone: backbone, node: backbone.node, snapshotEvery: snapshotEvery,
            logger: logger)
        inbox.withLock { $0.mayApplyInline = false }
        let start = try backbone.start(wake: { [weak self] in self?.wake() })
        let outcomes = worker.sync {
            context.commit = applier
            return applier.join(start)
        }
        deliver(outcomes)
    }

    /// Schedules a drain with no new jobs, at once: something arrived from the backbone.
    private func wake() {
        enqueue([], after: nil)
    }

    /// Waits for the jobs in flight, then lets the commit finish (a state directory folds its log
    /// into a checkpoint, so the next start is quick; a backbone's leases go). Call once, when
    /// the daemon stops.
    public func finish() {
        worker.sync { context.commit.finish() }
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
        let outcomes = context.commit.commit(jobs)
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
        // A drain without jobs was woken by the backbone: the shared log's commit serves what
        // arrived from it.
        let outcomes = context.commit.commit(jobs)
        if let metrics, !jobs.isEmpty { record(jobs, submitted: submitted, started: started, into: metrics) }
        if !outcomes.isEmpty { deliver(outcomes) }
    }

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
}

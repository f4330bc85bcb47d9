import CSystem
import Dispatch

/// How the apply queue's batches become final. The queue only schedules: it hands each batch,
/// in order and one at a time, to its commit on the apply thread, and delivers what comes back.
///
/// - `InMemoryCommit`: applied and final at once (no state directory, no backbone).
/// - `WriteAheadLogCommit` (DiffcastStorage): applied, then its log records made durable in the
///   state directory before any of its outcomes leaves (group commit); undone and answered
///   `unavailable` when the disk refuses them.
/// - `SharedLogApplier`: written through the backbone's shared log, which orders the writes of
///   every daemon, and applied as the log delivers them.
public protocol BatchCommit: AnyObject {
    /// Applies a batch to the engine and makes it final; returns the outcomes to deliver.
    func commit(_ jobs: [Job]) -> [Outcome]
    /// Whether a batch's log records are written somewhere before it is final: the engine then
    /// keeps them (and the lines of the requests), and can undo a batch. Without, a batch may be
    /// applied on the thread that submits it.
    var keepsLogRecords: Bool { get }
    /// Starts what runs beside the batches on `queue`, the apply thread (a commit's timers),
    /// which may `deliver` outcomes no batch answers. Called once, before the first batch.
    func start(
        on queue: DispatchQueue, deliver: @escaping @Sendable ([Outcome]) -> Void,
        recordSyncDuration: (@Sendable (Duration) -> Void)?)
    /// The daemon stops: called once, on the apply thread, after the last batch.
    func finish()
}

/// Batches applied in memory alone: final as soon as they are applied, with no log records kept
/// and nothing to undo.
public final class InMemoryCommit: BatchCommit {
    private let engine: ApplyEngine

    public init(engine: ApplyEngine) {
        self.engine = engine
        engine.keepsLogRecords = false
    }

    public var keepsLogRecords: Bool { false }

    public func commit(_ jobs: [Job]) -> [Outcome] {
        guard !jobs.isEmpty else { return [] }
        let outcomes = engine.process(jobs)
        engine.finalizeLastBatch()
        return outcomes
    }

    public func start(
        on queue: DispatchQueue, deliver: @escaping @Sendable ([Outcome]) -> Void,
        recordSyncDuration: (@Sendable (Duration) -> Void)?
    ) {}

    public func finish() {}
}

extension ApplyEngine {
    /// Makes the last batch final (`commitLastBatch`) and, when it dropped collections, gives
    /// their memory back to the system.
    public func finalizeLastBatch() {
        if commitLastBatch() { dc_release_free_memory() }
    }
}

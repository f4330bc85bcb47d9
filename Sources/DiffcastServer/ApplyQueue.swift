import Dispatch
import Synchronization

/// The one serial queue where every write is applied. Jobs that arrive while a batch is being
/// applied become the next batch, so bursts coalesce by themselves under load while a lone
/// write is applied at once. With a state store, a batch's log records are made durable before
/// its outcomes go back through `deliver` (called on the worker thread): group commit.
public final class ApplyQueue: Sendable {
    private let engine: EngineBox
    private let onPersistenceFailure: @Sendable (Error) -> Void
    private let inbox = Mutex<Inbox>(Inbox())
    private let worker = DispatchQueue(label: "diffcast.apply")
    private let deliver: @Sendable ([Outcome]) -> Void
    private let coalesceWindow: DispatchTimeInterval?

    private struct Inbox {
        var jobs: [Job] = []
        var drainScheduled = false
    }

    /// The engine and the store are touched only on `worker`, which makes this box safe to share.
    private final class EngineBox: @unchecked Sendable {
        let engine: ApplyEngine
        let store: StateStore?
        /// Syncs the log of the `interval` policy; lives as long as the queue.
        var syncTimer: (any DispatchSourceTimer)?
        init(_ engine: ApplyEngine, _ store: StateStore?) {
            self.engine = engine
            self.store = store
        }
    }

    public init(
        engine: ApplyEngine, store: StateStore? = nil, coalesceWindowMilliseconds: Int = 0,
        onPersistenceFailure: @escaping @Sendable (Error) -> Void = { _ in },
        deliver: @escaping @Sendable ([Outcome]) -> Void
    ) {
        let box = EngineBox(engine, store)
        self.engine = box
        self.deliver = deliver
        self.onPersistenceFailure = onPersistenceFailure
        self.coalesceWindow = coalesceWindowMilliseconds > 0 ? .milliseconds(coalesceWindowMilliseconds) : nil
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

    /// Waits for the jobs in flight, then folds the log into a checkpoint so the next start is
    /// quick. Call once, when the daemon stops.
    public func finish() {
        engine.syncTimer?.cancel()
        worker.sync {
            do {
                if let store = engine.store { try store.checkpoint(engine.engine) }
            } catch {
                onPersistenceFailure(error)
            }
        }
    }

    /// Queues jobs in order; safe from any thread.
    public func submit(_ jobs: [Job]) {
        guard !jobs.isEmpty else { return }
        let mustSchedule = inbox.withLock { inbox in
            inbox.jobs.append(contentsOf: jobs)
            defer { inbox.drainScheduled = true }
            return !inbox.drainScheduled
        }
        guard mustSchedule else { return }
        if let coalesceWindow {
            worker.asyncAfter(deadline: .now() + coalesceWindow) { self.drain() }
        } else {
            worker.async { self.drain() }
        }
    }

    /// Waits until every job submitted so far has been applied and delivered.
    public func waitUntilIdle() {
        worker.sync {}
    }

    private func drain() {
        let jobs = inbox.withLock { inbox in
            inbox.drainScheduled = false
            return inbox.jobs.swapAndClear()
        }
        guard !jobs.isEmpty else { return }
        let outcomes = engine.engine.process(jobs)
        if let store = engine.store {
            do {
                try store.append(engine.engine.takeLogRecords())
                if store.wantsCheckpoint { try store.checkpoint(engine.engine) }
            } catch {
                // Nothing of this batch may be acknowledged when it could not be made durable.
                onPersistenceFailure(error)
                return
            }
        } else {
            _ = engine.engine.takeLogRecords()
        }
        deliver(outcomes)
    }
}

extension Array {
    mutating func swapAndClear() -> [Element] {
        var taken: [Element] = []
        swap(&taken, &self)
        return taken
    }
}

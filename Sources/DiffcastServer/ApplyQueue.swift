import Dispatch
import Synchronization

/// The one serial queue where every write is applied. Jobs that arrive while a batch is being
/// applied become the next batch, so bursts coalesce by themselves under load while a lone
/// write is applied at once. Outcomes go back through `deliver`, called on the worker thread.
public final class ApplyQueue: Sendable {
    private let engine: EngineBox
    private let inbox = Mutex<Inbox>(Inbox())
    private let worker = DispatchQueue(label: "diffcast.apply")
    private let deliver: @Sendable ([Outcome]) -> Void
    private let coalesceWindow: DispatchTimeInterval?

    private struct Inbox {
        var jobs: [Job] = []
        var drainScheduled = false
    }

    /// The engine is touched only on `worker`, which is what makes this box safe to share.
    private final class EngineBox: @unchecked Sendable {
        let engine: ApplyEngine
        init(_ engine: ApplyEngine) { self.engine = engine }
    }

    public init(
        engine: ApplyEngine, coalesceWindowMilliseconds: Int = 0,
        deliver: @escaping @Sendable ([Outcome]) -> Void
    ) {
        self.engine = EngineBox(engine)
        self.deliver = deliver
        self.coalesceWindow = coalesceWindowMilliseconds > 0 ? .milliseconds(coalesceWindowMilliseconds) : nil
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
        deliver(engine.engine.process(jobs))
    }
}

extension Array {
    mutating func swapAndClear() -> [Element] {
        var taken: [Element] = []
        swap(&taken, &self)
        return taken
    }
}

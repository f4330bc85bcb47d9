import DiffcastCore
import DiffcastWire
import Dispatch
import Logging

/// The apply queue's work when daemons share collections through a `Backbone`. Every daemon
/// applies the shared log through the same engine, so versions, epochs and digests are the
/// same everywhere; only a collection's owner appends to its log, after applying a batch and
/// before answering it. A write that reaches a daemon that does not own its collection is
/// forwarded to the owner, and answered once this daemon has applied the owner's log through
/// that write. Runs on the apply worker only.
public final class SharedLogApplier {
    let engine: ApplyEngine
    let backbone: Backbone
    let logger: Logger
    let node: String
    /// The log sequence of each collection's last message that the engine reflects: a message
    /// at or below it is this daemon's own, already applied.
    var logPosition: [String: UInt64] = [:]
    /// Every log message through this sequence has been applied.
    var appliedThrough: UInt64 = 0
    /// Writes sent to their collection's owner.
    var writesForwarded: UInt64 = 0
    /// Log messages skipped by the rule of `apply`.
    var logSkipped: UInt64 = 0
    /// Log messages that wait for a snapshot that could not be read (see `apply`).
    var waiting: [LogMessage] = []
    /// Outcomes produced while serving arrivals in the middle of other work.
    var outcomes: [Outcome] = []
    /// How long a forwarded write waits for the owner's log to reach this daemon before it is
    /// answered anyway (its answer then waits for the event, as any write's answer does).
    static let logWaitMilliseconds = 5_000
    /// Forwarded requests are answered through this connection number, which the loop never
    /// gives out.
    public static let forwardedConnection: ConnectionID = 0

    /// Log messages of a collection between two of its snapshots (taken by its owner).
    let snapshotEvery: Int
    /// Messages this daemon appended to each collection's log since its last snapshot.
    var messagesSinceSnapshot: [String: Int] = [:]

    public init(engine: ApplyEngine, backbone: Backbone, node: String, snapshotEvery: Int, logger: Logger) {
        self.engine = engine
        self.backbone = backbone
        self.node = node
        self.snapshotEvery = max(snapshotEvery, 1)
        self.logger = logger
    }

    /// Takes every collection's snapshot, then applies the log through its end at start: the
    /// daemon serves once this returns.
    public func join(_ start: BackboneStart) -> [Outcome] {
        engine.keepsLogRecords = true
        for bytes in start.snapshots {
            guard let snapshot = SharedLogSnapshot(decoding: bytes) else {
                logger.error("a shared-log snapshot does not decode or its digest does not match; skipped")
                continue
            }
            adopt(snapshot, logEnd: start.logEnd)
        }
        waitForLog(through: start.logEnd, timeoutMilliseconds: Int.max)
        return outcomes.swapAndClear()
    }

    /// Takes a snapshot in place of the log before it. One that names a log message past the
    /// log's end (`logEnd`) is refused: it would make every later message up to that sequence
    /// look applied already, and the collection would stand still here.
    func adopt(_ snapshot: SharedLogSnapshot, logEnd: UInt64) {
        guard snapshot.logSequence <= logEnd else {
            logSkipped += 1
            return logger.error(
                "a shared-log snapshot names a log message past the log's end; skipped",
                metadata: [
                    "collection": "\(snapshot.name)", "log": "\(snapshot.logSequence)", "log_end": "\(logEnd)",
                ])
        }
        do {
            outcomes += try engine.adopt(snapshot)
            logPosition[snapshot.name] = max(logPosition[snapshot.name] ?? 0, snapshot.logSequence)
        } catch {
            logger.error("a shared-log snapshot does not apply", metadata: ["collection": "\(snapshot.name)"])
        }
    }

    /// Leaves the backbone: its leases go, so that other daemons take over at once.
    public func stop() {
        backbone.stop()
    }

    /// One drain of the apply queue: what arrived from the backbone, then the loop's jobs, a
    /// collection at a time (each collection's jobs in order; `list`, `stats` and new limits
    /// see every job before them).
    public func run(_ jobs: [Job]) -> [Outcome] {
        serveArrivals()
        var groups: [(collection: String?, jobs: [Job])] = []
        var index: [String: Int] = [:]
        for job in jobs {
            guard let name = job.collection else {
                for group in groups { handle(group.jobs, of: group.collection) }
                groups = []
                index = [:]
                handle([job], of: nil)
                continue
            }
            if let position = index[name] {
                groups[position].jobs.append(job)
            } else {
                index[name] = groups.count
                groups.append((name, [job]))
            }
        }
        for group in groups { handle(group.jobs, of: group.collection) }
        return outcomes.swapAndClear()
    }

    // MARK: - The shared log

    func serveArrivals() {
        let arrivals = backbone.takeArrivals()
        apply(arrivals.log)
        for batch in arrivals.forwarded { serve(batch) }
    }

    /// Applies log messages in stream order. Anyone who may publish on the log's subjects can
    /// put a message there, so a message is checked before it is applied, and one that cannot
    /// be applied is skipped — logged with its stream sequence, counted in `stats`
    /// (`log_skipped`) — by one rule that every daemon applies alike, so they stay identical:
    /// its payload does not decode, it has no records, a record names another collection than
    /// its subject, or its batch does not follow the collection's version even after the
    /// collection's snapshot was reloaded. A skipped message still moves the collection's log
    /// position, so its owner appends after it and is not fenced by it.
    ///
    /// When the snapshot that would decide cannot be read (the stream is re-electing after a
    /// partition heals), the message and those after it wait in `waiting` and are tried again at
    /// the next arrival: taking "no snapshot" for an answer would skip them, and leave the daemon
    /// behind for good.
    func apply(_ arrived: [LogMessage]) {
        let messages = waiting + arrived
        waiting = []
        for (index, message) in messages.enumerated() where message.sequence > appliedThrough {
            guard let name = message.collection ?? message.records.first?.collection else {
                appliedThrough = message.sequence
                skip(message, because: "its subject names no collection and it has no records")
                continue
            }
            guard !reflects(message.sequence, of: name) else {
                appliedThrough = message.sequence
                continue
            }
            if !message.records.isEmpty, !engine.followsHeldVersion(message.records), !recoverFromSnapshot(of: name) {
                waiting = Array(messages[index...])
                return
            }
            appliedThrough = message.sequence
            defer { logPosition[name] = max(logPosition[name] ?? 0, message.sequence) }
            guard !message.records.isEmpty, message.records.allSatisfy({ $0.collection == name }) else {
                skip(message, because: "it has no records of collection '\(name)' alone")
                continue
            }
            guard !reflects(message.sequence, of: name) else { continue }
            guard engine.followsHeldVersion(message.records) else {
                let held = engine.position(of: name).map { "version \($0.version)" } ?? "nothing"
                skip(message, because: "its batch does not follow \(held) of '\(name)'")
                continue
            }
            outcomes += engine.follow(message.records)
        }
    }

    func skip(_ message: LogMessage, because reason: String) {
        logSkipped += 1
        logger.error(
            "shared log: a message that cannot be applied; skipped",
            metadata: ["sequence": "\(message.sequence)", "reason": "\(reason)"])
    }

    /// Whether the engine already holds what a collection's log message brought: the owner's
    /// own messages, and those a snapshot covers.
    func reflects(_ sequence: UInt64, of name: String) -> Bool {
        logPosition[name].map { sequence <= $0 } ?? false
    }

    /// A message does not follow what this daemon holds of its collection: the messages in
    /// between were cut from the log after a snapshot, which holds them. False when the snapshot
    /// store could not be asked (try again later); true when it answered, with a snapshot (now
    /// adopted) or without.
    func recoverFromSnapshot(of name: String) -> Bool {
        let bytes: [UInt8]?
        let logEnd: UInt64
        do {
            bytes = try backbone.loadSnapshot(of: name)
            logEnd = try backbone.logEnd()
        } catch {
            logger.warning(
                "shared log: cannot read a snapshot now; the log waits",
                metadata: ["collection": "\(name)", "error": "\(error)"])
            return false
        }
        guard let bytes, let snapshot = SharedLogSnapshot(decoding: bytes) else {
            logger.error(
                "the shared log skips versions of a collection and has no snapshot of it",
                metadata: ["collection": "\(name)"])
            return true
        }
        adopt(snapshot, logEnd: logEnd)
        return true
    }

    /// Applies arrivals until the log has been applied through `sequence`.
    func waitForLog(through sequence: UInt64, timeoutMilliseconds: Int) {
        let deadline = ContinuousClock.now + .milliseconds(min(timeoutMilliseconds, 1 << 40))
        while appliedThrough < sequence, ContinuousClock.now < deadline {
            backbone.waitForArrivals(timeoutMilliseconds: 50)
            serveArrivals()
        }
    }

    // MARK: - Jobs

    func handle(_ jobs: [Job], of name: String?) {
        guard let name, jobs.contains(where: changesLog) else {
            // Reads: they log nothing, any daemon answers them.
            outcomes += engine.process(jobs).map(withBackboneStatistics)
            _ = engine.commitLastBatch()
            return
        }
        switch backbone.claim(name) {
        case .owned(let catchUpTo):
            if let catchUpTo { waitForLog(through: catchUpTo, timeoutMilliseconds: Self.logWaitMilliseconds) }
            guard let local = writeAsOwner(jobs, of: name) else { return forward(jobs, of: name, ownerHint: nil) }
            outcomes += local
        case .heldBy(let owner):
            forward(jobs, of: name, ownerHint: owner)
        case .notOwned:
            forward(jobs, of: name, ownerHint: nil)
        }
    }

    /// `stats` answers say where this daemon stands among the others.
    func withBackboneStatistics(_ outcome: Outcome) -> Outcome {
        guard case .statistics(let address, let id, var statistics) = outcome else { return outcome }
        statistics.backbone = BackboneStatistics(
            node: node, ownedCollections: backbone.ownedCollections, logApplied: appliedThrough,
            writesForwarded: writesForwarded, logSkipped: logSkipped, logBehind: backbone.logBehind)
        return .statistics(address, id: id, statistics)
    }

    func changesLog(_ job: Job) -> Bool {
        guard case .request(let request, _) = job else { return false }
        return engine.changesLog(request.command)
    }

    /// Applies jobs as the collection's owner and appends their records to the log. Returns
    /// their outcomes, or nil when another daemon wrote the log first (the jobs are undone and
    /// the lease is given up: the caller forwards them).
    func writeAsOwner(_ jobs: [Job], of name: String) -> [Outcome]? {
        let before = engine.position(of: name)
        let produced = engine.process(jobs)
        let records = engine.takeLogRecords()
        guard !records.isEmpty else {
            _ = engine.commitLastBatch()
            return produced
        }
        let position = engine.position(of: name)
        let dropped = records.last.map { if case .drop = $0 { true } else { false } } ?? false
        // JetStream drops a message whose ID it saw in the last minutes as a duplicate (a retried
        // append is stored once), so every message's ID must name what only it does: the
        // collection's epoch and version after it, or for a drop the epoch and version it ended
        // (an ID naming neither would make every drop by a daemon after its first in the window
        // a duplicate: acknowledged, never logged, never seen elsewhere).
        let messageID =
            dropped
            ? "\(name):\(before?.epoch ?? epochOf(records) ?? "-"):\(before?.version ?? 0):\(node):drop"
            : "\(epochOf(records) ?? position?.epoch ?? "-"):\(position?.version ?? 0):\(node)"
        switch backbone.append(records, of: name, after: logPosition[name] ?? 0, messageID: messageID) {
        case .stored(let sequence):
            engine.finalizeLastBatch()
            logPosition[name] = sequence
            snapshotIfDue(name, at: sequence)
            return produced
        case .fenced:
            logger.warning(
                "another daemon wrote the log of this collection; forwarding", metadata: ["collection": "\(name)"])
            engine.rollBackLastBatch()
            backbone.release(name)
            return nil
        case .failed(let reason):
            logger.error(
                "the shared log did not take a batch", metadata: ["collection": "\(name)", "error": "\(reason)"])
            engine.rollBackLastBatch()
            backbone.release(name)
            refuse(jobs, because: "the shared log did not take this write (\(reason)); it may or may not be applied")
            return []
        }
    }

    /// Every `snapshotEvery` messages an owner appends, it keeps the collection's snapshot, so
    /// that the log before it can be cut.
    func snapshotIfDue(_ name: String, at sequence: UInt64) {
        let count = messagesSinceSnapshot[name, default: 0] + 1
        guard count >= snapshotEvery, let bytes = engine.snapshotForSharedLog(of: name, logSequence: sequence) else {
            messagesSinceSnapshot[name] = count
            return
        }
        messagesSinceSnapshot[name] = 0
        backbone.saveSnapshot(bytes, of: name, at: sequence)
    }

    func epochOf(_ records: [LogRecord]) -> String? {
        for case .create(_, let epoch) in records { return epoch }
        return nil
    }

}

extension Job {
    /// The collection a job is about; nil for `list`, `stats` and new limits.
    var collection: String? {
        switch self {
        case .request(let request, _): request.command.collection
        case .catchUp(_, let name, _, _), .leaveWindow(_, let name): name
        case .setLimits: nil
        }
    }
}

/// Batches through the shared log: `run` is the commit, and the backbone's own threads, not timers
/// on the apply thread, bring what other daemons wrote (waking the queue).
///
/// `commit` blocks the apply thread on NATS, by design and within bounds. A batch is final only
/// once the shared log has stored it (its place among every daemon's writes is the log's), so no
/// outcome of it may leave before, and the next batch must see it. Each wait is bounded: an
/// append retries through a stream leader election for at most 15 s, 2 s an attempt
/// (`NATSBackbone.appendPatienceMilliseconds`), then its writes are answered `unavailable`; a
/// write forwarded to its collection's owner waits a lease and 2 s, serving what arrives from the
/// log meanwhile; the log is awaited at most `logWaitMilliseconds`; a snapshot is published
/// within 5 s or skipped. Meanwhile the loop thread goes on reading and writing every socket;
/// jobs queue behind the batch and coalesce into the next.
extension SharedLogApplier: BatchCommit {
    public func commit(_ jobs: [Job]) -> [Outcome] { run(jobs) }

    public var keepsLogRecords: Bool { true }

    public func start(
        on queue: DispatchQueue, deliver: @escaping @Sendable ([Outcome]) -> Void,
        recordSyncDuration: (@Sendable (Duration) -> Void)?
    ) {}

    public func finish() { stop() }
}

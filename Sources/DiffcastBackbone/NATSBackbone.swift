import CNATS
import DiffcastCore
import DiffcastEngine
import DiffcastWire
import Dispatch
import Glibc
import Logging
import Synchronization

/// The backbone on NATS JetStream: the shared log is the stream `DIFFCAST_LOG` (one subject per
/// collection, `diffcast.log.<name>`), each collection's latest snapshot the one message of its
/// subject in `DIFFCAST_SNAPSHOTS`, leases are keys of the key-value bucket
/// `diffcast_leases`, and forwarded writes are NATS requests to `diffcast.node.<node>` (a
/// known owner) or to the queue group behind `diffcast.claim` (any daemon that may own).
///
/// Safety does not rest on the lease: every append names the collection's last sequence it
/// has applied, so a daemon whose lease lapsed without its knowing (stopped, partitioned) is
/// refused by the stream (`wrong last sequence`) and acknowledges nothing. The lease only keeps
/// one daemon writing each collection, so that such refusals stay rare.
public final class NATSBackbone: Backbone, @unchecked Sendable {
    /// How to join.
    public struct Settings: Sendable {
        /// `nats://host:port` URLs of the cluster's servers.
        public var servers: [String]
        /// How long a lease lasts without renewal: the longest a dead owner's collections stay
        /// unwritable.
        public var leaseMilliseconds: Int = 3_000
        /// Whether this daemon takes leases; one that does not forwards every write.
        public var mayOwn = true
        /// Copies the cluster keeps of the log and the leases.
        public var replicas = 3
        /// How the daemon proves itself to the cluster, and checks the cluster (TLS).
        public var credentials = NATSCredentials()

        public init(servers: [String]) {
            self.servers = servers
        }
    }

    public let node: String
    private let settings: Settings
    let logger: Logger
    let client: NATSClient
    private let leaseBucket = Locked<KeyValueBucket?>(nil)
    let inbox = Locked(Inbox())
    /// The watch over following the log (see `checkFollowing`); used on `watchQueue` only.
    var watch = FollowWatch()
    let watchQueue = DispatchQueue(label: "diffcast.backbone.follow")
    let behind = Atomic<UInt64>(0)
    /// Set by `stop`: the watch reads nothing more.
    let stopping = Atomic<Bool>(false)
    private let arrivalSignal = DispatchSemaphore(value: 0)
    /// Set once by `start`. The closure sits in a box: read out of a generic lock by `inout`, a
    /// bare closure gained two reabstraction thunks per read, and a follower's stack grew with
    /// every log message until it overflowed.
    private let wakeHandler = Locked<WakeBox?>(nil)
    private let leases = Locked<[String: Lease]>([:])
    /// Other daemons' leases as last read, so that forwarding a write does not ask the lease
    /// store each time (see `remember`).
    private let knownHolders = Locked<[String: (node: String, until: ContinuousClock.Instant)]>([:])
    private let renewals = DispatchQueue(label: "diffcast.backbone.leases")
    /// Set once by `start`, cancelled by `stop`.
    private var renewalTimer: (any DispatchSourceTimer)?
    var watchTimer: (any DispatchSourceTimer)?

    static let stream = "DIFFCAST_LOG"
    static let snapshots = "DIFFCAST_SNAPSHOTS"
    static let bucket = "diffcast_leases"
    static let claimSubject = "diffcast.claim"
    /// How long an append keeps retrying through a stream leader election before it gives up.
    static let appendPatienceMilliseconds = 15_000

    /// What arrived and is not yet taken, and the last log sequence that arrived: a message at
    /// or below it (from an older subscription, after the log was followed anew) is dropped.
    struct Inbox {
        var arrivals = BackboneArrivals()
        var lastSequence: UInt64 = 0
    }

    /// Following the log as last checked: the subscription, and how long it has not moved
    /// while the stream was ahead of it.
    struct FollowWatch {
        var subscription: SubscriptionHandle?
        var lastSequence: UInt64 = 0
        var stalledChecks = 0
    }

    /// How often the watch compares what arrived with the stream's end.
    static let followCheckMilliseconds = 1_000
    /// Checks in a row without progress while behind, before the log is followed anew.
    static let stalledChecksBeforeRepair = 2
    /// How long one repair reads through the stream's leader (about 0.1 ms a message on
    /// loopback); the next check reads on when more are missing.
    static let repairMilliseconds = 2_000

    private struct Lease {
        var revision: UInt64
        /// After this instant the lease may have expired at the server: write no more under it.
        var deadline: ContinuousClock.Instant
    }

    /// Connects to the cluster (failing at once when no server answers).
    public init(settings: Settings, logger: Logger) throws {
        var generator = SystemRandomNumberGenerator()
        let suffix = String(generator.next() as UInt64 >> 16, radix: 36)
        var name = [CChar](repeating: 0, count: 256)
        let host =
            gethostname(&name, name.count - 1) == 0
            ? String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
        node = SubjectToken.encode(host.isEmpty ? "diffcastd" : host) + "-" + suffix
        self.settings = settings
        self.logger = logger
        client = try NATSClient(
            servers: settings.servers, name: "diffcastd \(node)", credentials: settings.credentials
        ) { error in
            logger.warning("NATS: \(error)")
        }
    }

    // MARK: - Backbone

    /// How long a start keeps asking JetStream before it gives up: a cluster that was just
    /// started, or is electing a new leader, answers "no responders" or times out for seconds.
    static let joinSeconds = 30

    /// Runs `body` (the start's JetStream calls, which are idempotent) until it succeeds or
    /// `joinSeconds` have passed, saying in the log why it tries again.
    private func retryingWhileJetStreamSettles<Result>(_ body: () throws -> Result) throws -> Result {
        let deadline = ContinuousClock.now + .seconds(Self.joinSeconds)
        while true {
            do {
                return try body()
            } catch {
                guard ContinuousClock.now < deadline else { throw error }
                logger.warning(
                    "joining the backbone: JetStream is not ready; trying again", metadata: ["error": "\(error)"])
                usleep(500_000)
            }
        }
    }

    public func start(wake: @escaping @Sendable () -> Void) throws -> BackboneStart {
        wakeHandler.withLock { $0 = WakeBox(wake: wake) }
        let (snapshots, last, subscription) = try retryingWhileJetStreamSettles {
            () throws -> ([[UInt8]], UInt64, SubscriptionHandle) in
            try client.ensureStream(name: Self.stream, subjects: ["diffcast.log.>"], replicas: settings.replicas)
            try client.ensureStream(
                name: Self.snapshots, subjects: ["diffcast.snapshot.>"], replicas: settings.replicas,
                maximumMessagesPerSubject: 1)
            // Snapshots first: the log before them may already be cut.
            let snapshots = try client.lastMessagePerSubject(stream: Self.snapshots, subject: "diffcast.snapshot.>")
            let bucket = try client.keyValueBucket(
                Self.bucket, ttlMilliseconds: Int64(settings.leaseMilliseconds), replicas: settings.replicas)
            leaseBucket.withLock { $0 = bucket }
            let last = try client.lastSequence(stream: Self.stream)
            return (snapshots, last, try followLog(from: 1))
        }
        watchQueue.sync { watch.subscription = subscription }
        let serve: @Sendable (NATSClient.Request) -> Void = { [weak self] request in
            guard let self else { return }
            let lines = request.data.split(separator: UInt8(ascii: "\n")).map(Array.init)
            let client = self.client
            let batch = ForwardedBatch(lines: lines) { reply in
                client.publish(request.replySubject, ForwardWire.encode(reply))
            }
            arrive(batch)
        }
        try client.serve("diffcast.node.\(node)", queue: nil, handler: serve)
        if settings.mayOwn { try client.serve(Self.claimSubject, queue: "owners", handler: serve) }
        startRenewals()
        startWatchingTheLog()
        logger.info(
            "joined the backbone",
            metadata: [
                "node": "\(node)", "servers": "\(settings.servers.joined(separator: ","))", "log_end": "\(last)",
                "owner": "\(settings.mayOwn)", "snapshots": "\(snapshots.count)",
            ])
        return BackboneStart(snapshots: snapshots, logEnd: last)
    }

    public var ownedCollections: Int {
        let now = ContinuousClock.now
        return leases.withLock { $0.values.count { $0.deadline > now } }
    }

    public var logBehind: UInt64 { behind.load(ordering: .relaxed) }

    public func takeArrivals() -> BackboneArrivals {
        inbox.withLock { inbox in
            defer { inbox.arrivals = BackboneArrivals() }
            return inbox.arrivals
        }
    }

    public func waitForArrivals(timeoutMilliseconds: Int) {
        let pending = inbox.withLock { !$0.arrivals.log.isEmpty || !$0.arrivals.forwarded.isEmpty }
        guard !pending else { return }
        _ = arrivalSignal.wait(timeout: .now() + .milliseconds(timeoutMilliseconds))
    }

    public func claim(_ collection: String) -> Claim {
        if let lease = leases.withLock({ $0[collection] }), lease.deadline > .now { return .owned(catchUpTo: nil) }
        if let holder = knownHolder(of: collection) { return .heldBy(holder) }
        guard let bucket = leaseBucket.withLock({ $0 }) else { return .notOwned(reason: "the backbone is not started") }
        let key = SubjectToken.encode(collection)
        guard settings.mayOwn else {
            if let holder = try? bucket.get(key) { return .heldBy(remember(holder.value, for: collection)) }
            return .notOwned(reason: "no daemon owns '\(collection)' and this one never owns (backbone_owner: false)")
        }
        let asked = ContinuousClock.now
        var revision: UInt64
        do {
            revision = try bucket.create(key, node)
        } catch {
            do {
                guard let holder = try bucket.get(key) else { return .notOwned(reason: "its lease is changing hands") }
                guard holder.value == node else { return .heldBy(remember(holder.value, for: collection)) }
                revision = try bucket.update(key, node, last: holder.revision)
            } catch {
                return .notOwned(reason: "the lease store did not answer (\(error))")
            }
        }
        do {
            let last = try client.lastMessage(stream: Self.stream, subject: Self.subject(of: collection))?.sequence ?? 0
            leases.withLock { $0[collection] = Lease(revision: revision, deadline: deadline(from: asked)) }
            logger.info("took the lease", metadata: ["collection": "\(collection)", "log_end": "\(last)"])
            return .owned(catchUpTo: last)
        } catch {
            return .notOwned(reason: "the shared log did not answer (\(error))")
        }
    }

    /// The holder of a collection's lease as last read, while that answer is fresh.
    private func knownHolder(of collection: String) -> String? {
        let now = ContinuousClock.now
        return knownHolders.withLock { $0[collection].flatMap { $0.until > now ? $0.node : nil } }
    }

    /// Trusts a holder read from the lease store for one lease length; a forward that finds it
    /// gone (no answer, or "not the owner") forgets it sooner.
    private func remember(_ holder: String, for collection: String) -> String {
        let until = ContinuousClock.now + .milliseconds(settings.leaseMilliseconds)
        knownHolders.withLock { $0[collection] = (holder, until) }
        return holder
    }

    private func forgetHolder(of collection: String) {
        knownHolders.withLock { $0[collection] = nil }
    }

    public func release(_ collection: String) {
        leases.withLock { $0[collection] = nil }
    }

    public func append(_ records: [LogRecord], of collection: String, after: UInt64, messageID: String) -> AppendResult
    {
        let payload = LogRecord.payload(of: records)
        let subject = Self.subject(of: collection)
        let giveUp = ContinuousClock.now + .milliseconds(Self.appendPatienceMilliseconds)
        while true {
            // A lease that may have lapsed writes nothing more; the stream would refuse it anyway
            // once the next owner has written.
            guard let lease = leases.withLock({ $0[collection] }), lease.deadline > .now else { return .fenced }
            do {
                let stored = try client.publish(
                    subject, payload, messageID: messageID, expectedLastSequence: after, timeoutMilliseconds: 2_000)
                return .stored(sequence: stored)
            } catch let error as NATSError {
                if error.isWrongLastSequence { return .fenced }
                guard error.isAmbiguous, ContinuousClock.now < giveUp else { return .failed(error.description) }
                logger.warning("shared log: retrying an append", metadata: ["error": "\(error)"])
                usleep(100_000)
            } catch {
                return .failed("\(error)")
            }
        }
    }

    public func forward(
        _ lines: [[UInt8]], of collection: String, ownerHint: String?, serving: () -> Void
    ) -> ForwardResult {
        var hint = ownerHint
        let payload = Array(lines.joined(separator: [UInt8(ascii: "\n")]))
        for _ in 0..<4 {
            if hint == nil, let holder = try? leaseBucket.withLock({ $0 })?.get(SubjectToken.encode(collection)) {
                hint = holder.value
            }
            let subject = hint.map { "diffcast.node.\($0)" } ?? Self.claimSubject
            switch request(subject, payload, serving: serving) {
            case .success(let reply):
                switch ForwardWire.decode(reply) {
                case .answered(let sequence, let responses)?:
                    guard responses.count == lines.count else { return .unavailable("the owner answered out of step") }
                    return .answered(sequence: sequence, responses: responses)
                case .notOwner(let owner)?:
                    forgetHolder(of: collection)
                    hint = owner
                case .unavailable(let reason)?:
                    return .unavailable(reason)
                case nil:
                    return .unavailable("the owner's answer does not parse")
                }
            case .failure(let error) where error.status == NATS_NO_RESPONDERS:
                forgetHolder(of: collection)
                guard let hint else { return .unavailable("no daemon that may own collections is running") }
                let seconds = Double(settings.leaseMilliseconds) / 1000
                return .unavailable(
                    "the owner of '\(collection)' (\(hint)) does not answer; another daemon takes it over when its "
                        + "lease ends, within \(seconds) s: retry")
            case .failure(let error):
                forgetHolder(of: collection)
                return .unavailable(
                    "the owner of '\(collection)' did not answer in time (\(error)); the write may or may not be applied"
                )
            }
        }
        return .unavailable("the owner of '\(collection)' keeps changing; retry")
    }

    public func saveSnapshot(_ snapshot: [UInt8], of collection: String, at sequence: UInt64) {
        let token = SubjectToken.encode(collection)
        do {
            _ = try client.publish("diffcast.snapshot.\(token)", snapshot, timeoutMilliseconds: 5_000)
            try client.purge(stream: Self.stream, subject: "diffcast.log.\(token)", below: sequence)
        } catch {
            // The log keeps everything until the next snapshot succeeds.
            logger.warning(
                "shared log: no snapshot this time", metadata: ["collection": "\(collection)", "error": "\(error)"])
        }
    }

    public func loadSnapshot(of collection: String) throws -> [UInt8]? {
        try client.lastMessage(
            stream: Self.snapshots, subject: "diffcast.snapshot.\(SubjectToken.encode(collection))")?
            .data
    }

    public func logEnd() throws -> UInt64 {
        try client.lastSequence(stream: Self.stream)
    }

    public func stop() {
        stopping.store(true, ordering: .relaxed)
        renewalTimer?.cancel()
        watchTimer?.cancel()
        // A check under way (a repair may take `repairMilliseconds`) ends before the client closes.
        watchQueue.sync {}
        let held = leases.withLock { leases in
            defer { leases = [:] }
            return leases
        }
        if let bucket = leaseBucket.withLock({ $0 }) {
            for (collection, lease) in held where lease.deadline > .now {
                bucket.delete(SubjectToken.encode(collection))
            }
        }
        client.close()
    }

    // MARK: - Plumbing

    static func subject(of collection: String) -> String {
        "diffcast.log." + SubjectToken.encode(collection)
    }

    /// Set only by the backbone's tests (`DIFFCAST_TEST_SILENT_FOLLOWER=1`): the followed log
    /// delivers nothing, as a consumer recreated on a peer that lags does, so that the watch's
    /// repair (`readThroughLeader`) alone keeps the daemon up to date.
    let followerIsSilent = getenv("DIFFCAST_TEST_SILENT_FOLLOWER") != nil

    private func arrive(_ batch: ForwardedBatch) {
        inbox.withLock { $0.arrivals.forwarded.append(batch) }
        arrived()
    }

    func arrived() {
        arrivalSignal.signal()
        wakeHandler.withLock { $0 }?.wake()
    }

    /// A lease taken or renewed by a request sent at `asked` lasts, as far as this daemon may
    /// assume, three quarters of its TTL from then: the server counts from a later instant.
    private func deadline(from asked: ContinuousClock.Instant) -> ContinuousClock.Instant {
        asked + .milliseconds(settings.leaseMilliseconds * 3 / 4)
    }

    /// Renews every held lease each third of its TTL; one that cannot be renewed is given up.
    private func startRenewals() {
        let timer = DispatchSource.makeTimerSource(queue: renewals)
        let interval = DispatchTimeInterval.milliseconds(max(settings.leaseMilliseconds / 3, 50))
        timer.schedule(deadline: .now() + interval, repeating: interval)
        timer.setEventHandler { [weak self] in self?.renewLeases() }
        timer.resume()
        renewalTimer = timer
    }

    private func renewLeases() {
        guard let bucket = leaseBucket.withLock({ $0 }) else { return }
        for (collection, lease) in leases.withLock({ $0 }) {
            let asked = ContinuousClock.now
            let renewed = try? bucket.update(SubjectToken.encode(collection), node, last: lease.revision)
            leases.withLock { leases in
                guard leases[collection]?.revision == lease.revision else { return }
                if let renewed {
                    leases[collection] = Lease(revision: renewed, deadline: deadline(from: asked))
                } else {
                    leases[collection] = nil
                    logger.warning("lost the lease", metadata: ["collection": "\(collection)"])
                }
            }
        }
    }

    /// A NATS request whose wait lets the apply worker serve what arrives meanwhile.
    private func request(_ subject: String, _ payload: [UInt8], serving: () -> Void) -> Result<[UInt8], NATSError> {
        let result = Locked<Result<[UInt8], NATSError>?>(nil)
        let client = self.client
        let signal = arrivalSignal
        // An owner that does not answer within a lease and a bit is stopped or cut off; its
        // successor can take over only once this daemon stops waiting for it.
        let timeout = Int64(settings.leaseMilliseconds + 2_000)
        DispatchQueue.global().async {
            let outcome: Result<[UInt8], NATSError>
            do {
                outcome = .success(
                    try client.request(subject, payload, timeoutMilliseconds: timeout))
            } catch let error as NATSError {
                outcome = .failure(error)
            } catch {
                outcome = .failure(NATSError("request to \(subject)", NATS_ERR))
            }
            result.withLock { $0 = outcome }
            signal.signal()
        }
        while true {
            if let done = result.withLock({ $0 }) { return done }
            waitForArrivals(timeoutMilliseconds: 20)
            serving()
        }
    }
}

/// The wake handler, kept as an object so that reading it copies a reference, not a closure.
private final class WakeBox: Sendable {
    let wake: @Sendable () -> Void
    init(wake: @escaping @Sendable () -> Void) { self.wake = wake }
}

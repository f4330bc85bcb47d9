import CLibUV
import CSystem
import DiffcastAccess
import DiffcastCore
import DiffcastEngine
import DiffcastHTTP
import DiffcastWire
import Glibc
import Logging

/// The daemon on its loop thread: accepts clients, parses their lines, hands requests to the
/// apply queue, and fans the outcomes out to subscribers. Every socket belongs to this thread,
/// which reads, writes and closes it; the one exception is `WriterThreads`, whose helpers
/// `writev` to the sockets of one slice of turns while this thread waits for them, so that no
/// socket is ever touched by two threads at once.
public final class Server {
    var configuration: ServerConfiguration
    /// Called on SIGHUP: the configuration to apply now, or nil to keep the current one (the
    /// callback logs why). Set before `run`.
    public var reloadConfiguration: (() -> ServerConfiguration?)?
    let logger: Logger
    let loop: UnsafeMutablePointer<uv_loop_t>
    var parser: RequestParser
    /// The parser's memory from one request line to the next.
    var parseWorkspace = RequestParser.Workspace()
    var listeners: [UnsafeMutableRawPointer] = []
    /// What the daemon listens on, as the log names it (socket paths, inherited descriptors).
    public internal(set) var listenerNames: [String] = []
    var connections: [ConnectionID: Connection] = [:]
    /// Subscriptions and what each connection is sent.
    lazy var fanOut = FanOut(
        policy: FanOut.Policy(configuration), host: self, logger: logger)
    var lastConnectionID: ConnectionID = 0
    var pendingJobs: [Job] = []
    /// The connections with something to write, and when each goes out: now, after the
    /// linger, or in its turn (`flushMarked`).
    var schedule = WriteSchedule<Connection>()
    /// The marked connections `flushMarked` decides, while new ones are marked in `schedule`.
    var flushing: [Connection] = []
    /// Active while turns wait: the loop then polls without blocking and writes the next slice
    /// of turns on each iteration.
    var turnHandle: UnsafeMutablePointer<uv_idle_t>?
    /// Armed while streams linger; nil when streams do not linger.
    var lingerTimer: UnsafeMutablePointer<uv_timer_t>?
    /// How long the last `flushLingering` took to write its streams, how much it wrote each and
    /// whether the kernel took every write whole: the next linger follows them
    /// (`lingerMilliseconds`).
    var lastLingerFlush = LingerFlush(nanoseconds: 0, bytesPerStream: 0, wroteWhole: true)
    /// The version being delivered goes to its idle line subscribers at once, without being
    /// queued (`deliverAppliedHere`).
    var sendsAtOnce = false
    /// The buffer descriptors of the write being started, kept to be reused.
    var writeBuffers: [uv_buf_t] = []
    /// With `io_threads` above 1: the threads that help write a slice of subscribers, and the
    /// slice's writes and buffer descriptors, kept to be reused.
    var writerThreads: WriterThreads?
    var parallelWrites: [WriterThreads.Write] = []
    var parallelBuffers: [uv_buf_t] = []
    let readBuffer: UnsafeMutableRawBufferPointer
    var mailbox: OutcomeMailbox?
    var applyQueue: ApplyQueue?
    var signals: [UnsafeMutablePointer<uv_signal_t>] = []
    var isStopping = false
    let systemd: SystemdIntegration
    /// Sockets from socket activation: systemd owns their paths, so they are never unlinked.
    var inheritedListeners: Set<UnsafeMutableRawPointer> = []
    var housekeepingTimers: [UnsafeMutablePointer<uv_timer_t>] = []
    var counters = LoopCounters()
    /// Prometheus metrics, made only when `metricsAddress` is set.
    let metrics: ServerMetrics?
    /// Sets the gauges read from the loop's state (connections, subscriptions, how far behind
    /// the shared log), just before a scrape is answered.
    var refreshMetricGauges: (() -> Void)?
    /// Why the apply queue refuses writes (a full disk), while it does.
    var readOnlyReason: String?
    /// Addresses whose tokens were refused, to slow guessing down.
    var authThrottle = FailedAuthThrottle()
    /// Connections that hold a capability token, by the token's `sub`.
    var connectionsPerSubject: [String: Int] = [:]
    /// Connections that hold a capability token: the ones whose rights may expire.
    var tokenHolders: Set<ConnectionID> = []

    /// Counted once, here and in `FanOut.Counters`: `stats` reads them, and a scrape adds
    /// their growth to the metrics (`reportedTotals`).
    struct LoopCounters {
        var connectionsAccepted: UInt64 = 0
        var requests: UInt64 = 0
        /// Requests and subscriptions refused for want of a right, and refused tokens.
        var denials: UInt64 = 0
        /// Tokens refused (`auth`, or presented over HTTP).
        var authFailures: UInt64 = 0
    }

    /// The loop's counters as last added to the metrics.
    var reportedTotals = ServerMetrics.LoopTotals()

    /// The loop's counters now, for the metrics.
    var loopTotals: ServerMetrics.LoopTotals {
        ServerMetrics.LoopTotals(
            connectionsAccepted: counters.connectionsAccepted, requests: counters.requests,
            eventsQueued: fanOut.counters.eventsQueued, bytesQueued: fanOut.counters.bytesQueued,
            catchUps: fanOut.counters.catchUps, slowDisconnects: fanOut.counters.slowDisconnects,
            denials: counters.denials, authFailures: counters.authFailures)
    }

    public init(configuration: ServerConfiguration, logger: Logger, systemd: SystemdIntegration) {
        self.systemd = systemd
        self.configuration = configuration
        self.logger = logger
        self.parser = RequestParser(limits: configuration.requestLimits)
        self.loop = LoopHandles.makeLoop()
        self.readBuffer = LoopHandles.makeReadBuffer(byteCount: 256 * 1024)
        self.metrics = configuration.metricsAddress == nil ? nil : ServerMetrics()
    }

    deinit {
        LoopHandles.free(readBuffer)
        LoopHandles.free(loop)
    }

    /// Binds the listeners, then runs the loop until SIGINT/SIGTERM; returns after a clean stop.
    /// `commit` makes each batch of writes final (in memory by default; `WriteAheadLogCommit`
    /// with a state directory); with a `backbone`, its shared log does from the start.
    public func run(
        engine: ApplyEngine, commit: (any BatchCommit)? = nil, backbone: Backbone? = nil, onReady: () -> Void = {}
    ) throws {
        dc_ignore_sigpipe()
        dc_unblock_signals()
        // A request's line is for the journal and the backbone: without either, not copied.
        parser.keepsLines = commit?.keepsLogRecords == true || backbone != nil
        try check(uv_loop_init(loop), "uv_loop_init")
        LoopHandles.setOwner(self, of: loop)
        try startApplying(engine: engine, commit: commit, backbone: backbone)
        try handleSignals()
        try listen(backbone: backbone)
        onReady()
        systemd.notify("READY=1\nSTATUS=\(statusLine())")
        uv_run(loop, UV_RUN_DEFAULT)
        uv_loop_close(loop)
    }

    /// The apply queue's thread and the mailbox that brings its outcomes to the loop, the write
    /// turns' idle handle and the writer threads.
    private func startApplying(engine: ApplyEngine, commit: (any BatchCommit)?, backbone: Backbone?) throws {
        let asyncHandle = LoopHandles.make(uv_async_t.self, UV_ASYNC)
        try check(
            uv_async_init(loop, asyncHandle) { handle in Server.from(handle)?.drainMailbox() }, "uv_async_init",
            orDiscard: asyncHandle)
        let mailbox = OutcomeMailbox(handle: asyncHandle)
        self.mailbox = mailbox
        if configuration.ioThreads > 1 {
            writerThreads = WriterThreads(helperCount: configuration.ioThreads - 1)
        }
        let turnHandle = LoopHandles.make(uv_idle_t.self, UV_IDLE)
        try check(uv_idle_init(loop, turnHandle), "uv_idle_init", orDiscard: turnHandle)
        self.turnHandle = turnHandle
        let applyQueue = ApplyQueue(
            engine: engine, commit: commit, coalesceWindowMilliseconds: configuration.coalesceWindowMilliseconds,
            metrics: metrics, deliver: { mailbox.post($0) })
        self.applyQueue = applyQueue
        if let backbone {
            try applyQueue.attach(backbone, snapshotEvery: configuration.backboneSnapshotEvery, logger: logger)
        }
    }

    /// SIGINT and SIGTERM stop the loop cleanly; SIGHUP reloads the configuration.
    private func handleSignals() throws {
        for signal in [SIGINT, SIGTERM, SIGHUP] {
            let handle = LoopHandles.make(uv_signal_t.self, UV_SIGNAL)
            try check(uv_signal_init(loop, handle), "uv_signal_init", orDiscard: handle)
            signals.append(handle)
            try check(
                uv_signal_start(
                    handle,
                    { handle, signal in
                        if signal == SIGHUP {
                            Server.from(handle)?.reload()
                        } else {
                            Server.from(handle)?.stop(reason: "signal \(signal)")
                        }
                    }, signal), "uv_signal_start")
            uv_unref(dc_handle(handle))
        }
    }

    /// The listeners systemd passed, else the Unix socket and TCP; HTTP and metrics; then the
    /// housekeeping timers. A start that fails after binding the socket leaves no file behind.
    private func listen(backbone: Backbone?) throws {
        let inherited = SystemdIntegration.takeInheritedListeners()
        for descriptor in inherited {
            let handle = try Listener.inherited(descriptor: descriptor, server: self)
            listeners.append(handle)
            inheritedListeners.insert(handle)
        }
        var boundSocketPath: String?
        do {
            if inherited.isEmpty, let path = configuration.socketPath {
                listeners.append(try Listener.unix(path: path, server: self))
                boundSocketPath = path
            }
            if inherited.isEmpty, let address = configuration.tcpAddress {
                listeners.append(try Listener.tcp(address: address, server: self))
            }
            if let address = configuration.httpAddress {
                listeners.append(try Listener.tcp(address: address, server: self, endpoint: .http))
            }
            if let metrics, let address = configuration.metricsAddress {
                refreshMetricGauges = { [unowned self] in
                    metrics.connections.set(Int64(clientConnectionCount))
                    metrics.subscriptions.set(Int64(fanOut.subscriptionCount))
                    let totals = loopTotals
                    metrics.record(totals, since: reportedTotals)
                    reportedTotals = totals
                    if let backbone { metrics.backboneLogBehind.set(Int64(clamping: backbone.logBehind)) }
                }
                listeners.append(try Listener.tcp(address: address, server: self, endpoint: .metrics))
            }
            try startHousekeeping()
        } catch {
            if let boundSocketPath { unlink(boundSocketPath) }
            throw error
        }
    }

    static func from(_ handle: UnsafeMutableRawPointer?) -> Server? {
        LoopHandles.owner(ofLoopOf: handle, as: Server.self)
    }

    /// Stops accepting, lets the apply queue finish, flushes what can be flushed and closes.
    func stop(reason: String) {
        guard !isStopping else { return }
        isStopping = true
        logger.info("stopping", metadata: ["reason": "\(reason)"])
        systemd.notify("STOPPING=1\nSTATUS=stopping: \(reason)")
        for listener in listeners {
            Listener.close(
                listener, removingSocketAt: inheritedListeners.contains(listener) ? nil : configuration.socketPath)
        }
        listeners = []
        for timer in housekeepingTimers {
            LoopHandles.close(timer)
        }
        housekeepingTimers = []
        // From here on everything is written at once, what lingered or waited its turn first.
        lingerTimer = nil
        flushLingering()
        if let turnHandle {
            self.turnHandle = nil
            LoopHandles.close(turnHandle)
        }
        writeAllTurns()
        writerThreads?.stop()
        writerThreads = nil
        applyQueue?.waitUntilIdle()
        drainMailbox()
        applyQueue?.finish()
        for connection in connections.values {
            stopReading(connection)
            finishIfDone(connection)
        }
        for handle in signals {
            LoopHandles.close(handle)
        }
        signals = []
        if let mailbox {
            mailbox.close()
            LoopHandles.close(mailbox.handle)
        }
    }

    func check(_ result: Int32, _ what: String) throws {
        if result != 0 { throw ServerError.libuv(what, result) }
    }

    /// Checks a handle's init; a handle that could not be initialized is freed.
    func check<Handle>(_ result: Int32, _ what: String, orDiscard handle: UnsafeMutablePointer<Handle>) throws {
        guard result == 0 else {
            LoopHandles.discard(handle)
            throw ServerError.libuv(what, result)
        }
    }
}

extension Server: FanOutHost {
    func connection(_ id: ConnectionID) -> Connection? { connections[id] }

    func submit(_ job: Job) { pendingJobs.append(job) }

    /// `connection` queued something: it is marked, and the next flush decides when that goes
    /// out (`flushMarked`). A line subscriber that queued events alone, which that flush would
    /// put in the line of turns, goes there at once: one list less to pass through per
    /// subscriber and version. If it queues an answer before its turn, it is marked then, and
    /// the flush writes it at once.
    func needsWrite(_ connection: Connection) {
        if case .lines = connection.transport, !connection.scheduled.isMarked, mayWaitItsTurn(connection) {
            schedule.waitTurn(connection)
        } else {
            schedule.mark(connection)
        }
    }
}

extension FanOut.Policy {
    init(_ configuration: ServerConfiguration) {
        self.init(
            unsentBytes: WaterMarks(high: configuration.maximumUnsentBytes),
            slowSubscribers: configuration.slowSubscriberPolicy)
    }
}

/// Why the server could not start.
public enum ServerError: Error, CustomStringConvertible {
    case libuv(String, Int32)
    case socketPathTooLong(String, limit: Int)
    case alreadyServed(String)
    case notASocket(String)
    case noDirectory(String, directory: String)
    case badAddress(String)

    public var description: String {
        switch self {
        case .libuv(let what, let code):
            "\(what) failed: \(String(cString: uv_strerror(code)))"
        case .socketPathTooLong(let path, let limit):
            "socket path '\(path)' is longer than \(limit) bytes"
        case .alreadyServed(let path):
            "another daemon is already serving \(path); stop it or choose another --socket"
        case .notASocket(let path):
            "\(path) exists and is not a socket; it is left as it is: choose another --socket"
        case .noDirectory(let path, let directory):
            "cannot make the socket \(path): the directory \(directory) does not exist"
        case .badAddress(let address):
            "bad TCP address '\(address)': expected IP:PORT, with an IP address (127.0.0.1:7070, [::1]:7070); "
                + "host names are not resolved"
        }
    }
}

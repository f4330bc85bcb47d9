import CLibUV
import DiffcastCore
import DiffcastWire
import Glibc
import Logging

/// The daemon on its loop thread: accepts clients, parses their lines, hands requests to the
/// apply queue, and fans the outcomes out to subscribers. Every socket belongs to this thread.
public final class Server {
    private(set) var configuration: ServerConfiguration
    /// Called on SIGHUP: the configuration to apply now, or nil to keep the current one (the
    /// callback logs why). Set before `run`.
    public var reloadConfiguration: (() -> ServerConfiguration?)?
    let logger: Logger
    let loop: UnsafeMutablePointer<uv_loop_t>
    private let parser: RequestParser
    private var listeners: [UnsafeMutableRawPointer] = []
    /// What the daemon listens on, as the log names it (socket paths, inherited descriptors).
    public internal(set) var listenerNames: [String] = []
    var connections: [ConnectionID: Connection] = [:]
    private var subscribers: [String: Set<ConnectionID>] = [:]
    private var lastConnectionID: ConnectionID = 0
    private var pendingJobs: [Job] = []
    var dirty: Set<ConnectionID> = []
    /// The buffer descriptors of the write being started, kept to be reused.
    private var writeBuffers: [uv_buf_t] = []
    private let readBuffer: UnsafeMutableRawBufferPointer
    private var mailbox: OutcomeMailbox?
    private var applyQueue: ApplyQueue?
    private var signals: [UnsafeMutablePointer<uv_signal_t>] = []
    private var isStopping = false
    private let systemd: SystemdIntegration
    /// Sockets from socket activation: systemd owns their paths, so they are never unlinked.
    private var inheritedListeners: Set<UnsafeMutableRawPointer> = []
    private var housekeepingTimers: [UnsafeMutablePointer<uv_timer_t>] = []
    private var counters = LoopCounters()
    /// Prometheus metrics, made only when `metricsAddress` is set.
    let metrics: ServerMetrics?
    private(set) var metricsEndpoint: MetricsEndpoint?
    /// Why the apply queue refuses writes (a full disk), while it does.
    private var readOnlyReason: String?

    private struct LoopCounters {
        var connectionsAccepted: UInt64 = 0
        var requests: UInt64 = 0
        var eventsQueued: UInt64 = 0
        var bytesQueued: UInt64 = 0
        var catchUps: UInt64 = 0
        var slowDisconnects: UInt64 = 0
    }

    public init(configuration: ServerConfiguration, logger: Logger, systemd: SystemdIntegration) {
        self.systemd = systemd
        self.configuration = configuration
        self.logger = logger
        self.parser = RequestParser(limits: configuration.requestLimits)
        self.loop = UnsafeMutablePointer<uv_loop_t>.allocate(capacity: 1)
        self.readBuffer = .allocate(byteCount: 256 * 1024, alignment: 16)
        self.metrics = configuration.metricsAddress == nil ? nil : ServerMetrics()
    }

    deinit {
        readBuffer.deallocate()
        loop.deallocate()
    }

    /// Binds the listeners, then runs the loop until SIGINT/SIGTERM; returns after a clean stop.
    public func run(
        engine: ApplyEngine, store: StateStore? = nil, backbone: Backbone? = nil, onReady: () -> Void = {}
    ) throws {
        dc_ignore_sigpipe()
        dc_unblock_signals()
        try check(uv_loop_init(loop), "uv_loop_init")
        loop.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        let asyncHandle = UnsafeMutablePointer<uv_async_t>.allocate(capacity: 1)
        asyncHandle.initialize(to: uv_async_t())
        try check(uv_async_init(loop, asyncHandle) { handle in Server.from(handle)?.drainMailbox() }, "uv_async_init")
        let mailbox = OutcomeMailbox(handle: asyncHandle)
        self.mailbox = mailbox
        let logger = self.logger
        applyQueue = ApplyQueue(
            engine: engine, store: store, coalesceWindowMilliseconds: configuration.coalesceWindowMilliseconds,
            metrics: metrics,
            onPersistenceFailure: { error in
                // Fail-stop only where nothing else is safe: the log could not be cut back to its
                // last good record (a full disk alone is answered `unavailable`).
                logger.critical("cannot keep the state directory consistent, stopping: \(error)")
                exit(70)
            },
            deliver: { mailbox.post($0) })
        if let backbone, let applyQueue {
            try applyQueue.attach(backbone, snapshotEvery: configuration.backboneSnapshotEvery, logger: logger)
        }
        for signal in [SIGINT, SIGTERM, SIGHUP] {
            let handle = UnsafeMutablePointer<uv_signal_t>.allocate(capacity: 1)
            handle.initialize(to: uv_signal_t())
            uv_signal_init(loop, handle)
            uv_signal_start(
                handle,
                { handle, signal in
                    if signal == SIGHUP {
                        Server.from(handle)?.reload()
                    } else {
                        Server.from(handle)?.stop(reason: "signal \(signal)")
                    }
                }, signal)
            uv_unref(dc_handle(handle))
            signals.append(handle)
        }
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
                listeners.append(try Listener.tcp(address: address, server: self, purpose: .http))
            }
            if let metrics, let address = configuration.metricsAddress {
                metricsEndpoint = MetricsEndpoint(metrics: metrics) { [unowned self] in
                    metrics.connections.set(Int64(connections.count))
                    metrics.subscriptions.set(Int64(subscribers.values.reduce(0) { $0 + $1.count }))
                    if let backbone { metrics.backboneLogBehind.set(Int64(clamping: backbone.logBehind)) }
                }
                listeners.append(try Listener.tcp(address: address, server: self, purpose: .metrics))
            }
        } catch {
            // A start that fails after binding the socket leaves no file behind.
            if let boundSocketPath { unlink(boundSocketPath) }
            throw error
        }
        startHousekeeping()
        onReady()
        systemd.notify("READY=1\nSTATUS=\(statusLine())")
        uv_run(loop, UV_RUN_DEFAULT)
        uv_loop_close(loop)
        asyncHandle.deallocate()
    }

    static func from(_ handle: UnsafeMutableRawPointer?) -> Server? {
        guard let handle, let loop = dc_handle(handle).pointee.loop, let data = loop.pointee.data else { return nil }
        return Unmanaged<Server>.fromOpaque(data).takeUnretainedValue()
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
            uv_close(dc_handle(timer)) { $0.map { UnsafeMutableRawPointer($0).deallocate() } }
        }
        housekeepingTimers = []
        applyQueue?.waitUntilIdle()
        drainMailbox()
        applyQueue?.finish()
        for connection in connections.values {
            stopReading(connection)
            finishIfDone(connection)
        }
        for handle in signals {
            uv_close(dc_handle(handle)) { handle in handle?.deallocate() }
        }
        signals = []
        if let mailbox {
            mailbox.close()
            uv_close(dc_handle(mailbox.handle), nil)
        }
    }

    // MARK: - Reloading

    /// Applies what can change while clients stay connected: limits, access lists, the token,
    /// the slow-subscriber policy. New line limits apply to new connections.
    private func reload() {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let microseconds = UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
        systemd.notify("RELOADING=1\nMONOTONIC_USEC=\(microseconds)")
        defer { systemd.notify("READY=1\nSTATUS=\(statusLine())") }
        guard let new = reloadConfiguration?() else { return }
        configuration.maximumLineBytes = new.maximumLineBytes
        configuration.maximumUnsentBytes = new.maximumUnsentBytes
        configuration.slowSubscriberPolicy = new.slowSubscriberPolicy
        configuration.maximumConnections = new.maximumConnections
        configuration.publishers = new.publishers
        configuration.subscribers = new.subscribers
        configuration.tcpToken = new.tcpToken
        configuration.limits = new.limits
        _ = applyQueue?.submit([.setLimits(new.limits)])
        logger.info("configuration reloaded")
    }

    // MARK: - Supervision

    /// Status for `systemctl status` every few seconds, and the watchdog ping when systemd asks
    /// for one. Both timers are unreferenced: they never keep the loop alive on their own.
    private func startHousekeeping() {
        func every(_ milliseconds: UInt64, _ callback: @escaping uv_timer_cb) {
            let timer = UnsafeMutablePointer<uv_timer_t>.allocate(capacity: 1)
            timer.initialize(to: uv_timer_t())
            uv_timer_init(loop, timer)
            uv_timer_start(timer, callback, milliseconds, milliseconds)
            uv_unref(dc_handle(timer))
            housekeepingTimers.append(timer)
        }
        if configuration.httpAddress != nil {
            every(Self.eventStreamHeartbeatMilliseconds) { timer in Server.from(timer)?.sendHeartbeats() }
        }
        guard systemd.isSupervised else { return }
        every(5000) { timer in
            guard let server = Server.from(timer) else { return }
            server.systemd.notify("STATUS=\(server.statusLine())")
        }
        if let interval = systemd.watchdogIntervalMilliseconds {
            every(interval) { timer in Server.from(timer)?.systemd.notify("WATCHDOG=1") }
        }
    }

    private func statusLine() -> String {
        let subscriptions = subscribers.values.reduce(0) { $0 + $1.count }
        let serving =
            "serving \(subscribers.count) subscribed collections, \(subscriptions) subscriptions, "
            + "\(connections.count) connections"
        guard let readOnlyReason else { return serving }
        return "read-only: disk full or failing (\(readOnlyReason)); " + serving
    }

    // MARK: - Connections

    func accept(_ handle: UnsafeMutableRawPointer, isTCP: Bool, isHTTP: Bool = false) {
        lastConnectionID += 1
        counters.connectionsAccepted += 1
        metrics?.connectionsAccepted.increment()
        logger.debug("connection accepted", metadata: ["connection": "\(lastConnectionID)", "tcp": "\(isTCP)"])
        let connection = Connection(
            id: lastConnectionID, handle: handle, maximumLineBytes: configuration.maximumLineBytes,
            // HTTP requests are checked by the router, token and all, before they become lines.
            isAuthenticated: !isTCP || isHTTP || configuration.tcpToken == nil, isTCP: isTCP)
        connection.peer = isTCP ? nil : PeerCredentials(stream: handle)
        if isHTTP { connection.transport = .http(HTTPExchanges(reader: httpRequestReader())) }
        connections[connection.id] = connection
        dc_handle(handle).pointee.data = UnsafeMutableRawPointer(bitPattern: UInt(connection.id))
        guard connections.count <= configuration.maximumConnections else {
            logger.warning(
                "refusing a connection", metadata: ["limit": "max_connections \(configuration.maximumConnections)"])
            let error = DiffcastError.limitExceeded(
                "max_connections (\(configuration.maximumConnections)) clients connected")
            connection.enqueue(SharedBytes(WireEncoder.disconnectEvent(code: error.code, message: error.message)))
            connection.peerFinished = true
            dirty.insert(connection.id)
            flushDirty()
            return
        }
        startReading(connection)
    }

    /// Whether the connection's peer may make this request; denials are logged.
    private func isPermitted(_ request: Request, on connection: Connection) -> Bool {
        let list: AccessList
        switch request.command {
        case .write, .drop: list = configuration.publishers
        case .get, .subscribe, .list, .stats: list = configuration.subscribers
        case .ping, .auth, .unsubscribe: return true
        }
        // The lists name Unix-socket peers; TCP peers are checked by token before writing.
        guard connection.isTCP || list.allows(connection.peer) else {
            logger.warning(
                "denied", metadata: ["op": "\(request.op)", "uid": "\(connection.peer?.userID.description ?? "?")"])
            return false
        }
        return true
    }

    private func startReading(_ connection: Connection) {
        connection.isReadingPaused = false
        uv_read_start(
            dc_stream(connection.handle),
            { handle, _, buffer in
                guard let server = Server.from(handle), let buffer else { return }
                buffer.pointee = uv_buf_init(
                    server.readBuffer.baseAddress?.assumingMemoryBound(to: CChar.self), UInt32(server.readBuffer.count))
            },
            { stream, count, _ in
                guard let stream, let server = Server.from(stream) else { return }
                server.didRead(stream: stream, count: count)
            })
    }

    /// Requests outstanding at the apply queue on one connection before it is read no further.
    private static let maximumOutstandingRequests: UInt64 = 65_536

    /// Backpressure: a client that sends faster than it reads its answers is not read until it
    /// has drained, so neither its responses nor its queued requests grow without bound.
    private func pauseReadingIfFlooded(_ connection: Connection) {
        guard !connection.isReadingPaused, !connection.peerFinished else { return }
        if connection.unsentBytes > configuration.maximumUnsentBytes
            || connection.outstandingRequests > Self.maximumOutstandingRequests
        {
            uv_read_stop(dc_stream(connection.handle))
            connection.isReadingPaused = true
        }
    }

    private func resumeReadingIfDrained(_ connection: Connection) {
        guard connection.isReadingPaused, !connection.peerFinished, !connection.isClosing,
            connection.unsentBytes <= configuration.maximumUnsentBytes / 2,
            connection.outstandingRequests <= Self.maximumOutstandingRequests / 2
        else { return }
        startReading(connection)
    }

    private func connection(of handle: UnsafeMutableRawPointer) -> Connection? {
        guard let data = dc_handle(handle).pointee.data else { return nil }
        return connections[ConnectionID(UInt(bitPattern: data))]
    }

    private func didRead(stream: UnsafeMutablePointer<uv_stream_t>, count: Int) {
        guard let connection = connection(of: stream) else { return }
        if count < 0 {
            if count == Int(UV_EOF.rawValue) {
                stopReading(connection)
                finishIfDone(connection)
            } else {
                close(connection)
            }
            return
        }
        guard count > 0 else { return }
        let bytes = UnsafeRawBufferPointer(rebasing: readBuffer[0..<count])
        if case .lines = connection.transport {
            connection.framer.feed(bytes) { piece in
                switch piece {
                case .line(let line): handleLine(line, from: connection)
                case .lineTooLong: answerLineTooLong(on: connection)
                }
            }
        } else {
            readHTTP(bytes, from: connection)
        }
        dirty.insert(connection.id)
        submitPendingJobs()
        flushDirty()
        pauseReadingIfFlooded(connection)
    }

    /// A line over `max_line_bytes` is answered `line_too_long` and skipped; the connection goes on.
    func answerLineTooLong(on connection: Connection) {
        let slot = connection.reserveSlot()
        let error = DiffcastError.lineTooLong(limit: configuration.maximumLineBytes)
        logRejected(error, op: nil, on: connection)
        connection.answer(slot: slot, SharedBytes(WireEncoder.failure(id: nil, op: nil, error: error)))
    }

    /// Requests refused before they reach the apply queue are logged as the engine logs the
    /// ones it refuses ("request rejected", at debug).
    private func logRejected(_ error: DiffcastError, op: String?, on connection: Connection) {
        logger.debug(
            "request rejected",
            metadata: [
                "op": "\(op ?? "-")", "code": "\(error.code)", "message": "\(error.message)",
                "connection": "\(connection.id)",
            ])
    }

    func handleLine(_ line: [UInt8], from connection: Connection) {
        // Lines after a policy stop (too many wrong tokens, a slow-subscriber disconnect) that
        // arrived in the same read are not answered.
        guard !connection.peerFinished else { return }
        if line.allSatisfy({ $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\r") || $0 == UInt8(ascii: "\t") }) {
            return
        }
        counters.requests += 1
        metrics?.requests.increment()
        let slot = connection.reserveSlot()
        let address = ResponseAddress(connection: connection.id, slot: slot)
        let request: Request
        do {
            request = try parser.parse(line: line)
        } catch {
            logRejected(error.error, op: error.op, on: connection)
            connection.answer(
                slot: slot, SharedBytes(WireEncoder.failure(id: error.id, op: error.op, error: error.error)))
            return
        }
        guard isPermitted(request, on: connection) else {
            let who = connection.peer.map { "uid \($0.userID)" } ?? "this peer"
            let error = DiffcastError.unauthorized("\(who) may not '\(request.op)' (see --publishers/--subscribers)")
            connection.answer(
                slot: slot, SharedBytes(WireEncoder.failure(id: request.id, op: request.op, error: error)))
            return
        }
        if case .http = connection.transport, case .subscribe = request.command {
            // A plain HTTP response has nowhere to put events.
            let error = DiffcastError.invalidArgument(
                "subscribe over HTTP with GET /v1/collections/NAME/events (Server-Sent Events) or /v1/ws (WebSocket)")
            connection.answer(
                slot: slot, SharedBytes(WireEncoder.failure(id: request.id, op: request.op, error: error)))
            return
        }
        switch request.command {
        case .ping, .auth: break
        default:
            guard connection.isAuthenticated else {
                let error = DiffcastError.unauthorized(
                    "this TCP listener takes a token first: send `auth TOKEN` (the daemon's --tcp-token; the diffcast "
                        + "command sends --token or $DIFFCAST_TOKEN)")
                connection.answer(
                    slot: slot, SharedBytes(WireEncoder.failure(id: request.id, op: request.op, error: error)))
                return
            }
        }
        switch request.command {
        case .ping:
            connection.answer(slot: slot, SharedBytes(WireEncoder.success(id: request.id, op: request.op)))
        case .auth(let token):
            if let expected = configuration.tcpToken, Self.constantTimeEqual(token, expected) {
                connection.isAuthenticated = true
                connection.answer(slot: slot, SharedBytes(WireEncoder.success(id: request.id, op: request.op)))
            } else {
                connection.failedAuthentications += 1
                logger.warning(
                    "authentication failed",
                    metadata: ["connection": "\(connection.id)", "attempt": "\(connection.failedAuthentications)"])
                let error = DiffcastError.unauthorized("wrong token")
                connection.answer(
                    slot: slot, SharedBytes(WireEncoder.failure(id: request.id, op: request.op, error: error)))
                if connection.failedAuthentications >= Self.authenticationAttempts {
                    stopReading(connection)
                }
            }
        case .unsubscribe(let name):
            removeSubscription(of: connection, to: name)
            connection.answer(slot: slot, SharedBytes(WireEncoder.success(id: request.id, op: request.op)))
            connection.releaseAnswers()
        case .write, .drop, .get, .subscribe, .list, .stats:
            pendingJobs.append(.request(request, address))
        }
    }

    /// Wrong tokens a connection may present before it is closed.
    private static let authenticationAttempts = 3

    /// Compares every byte whatever the first difference, so timing tells nothing of the token.
    private static func constantTimeEqual(_ given: String, _ expected: String) -> Bool {
        let left = Array(given.utf8)
        let right = Array(expected.utf8)
        var difference = UInt8(truncatingIfNeeded: left.count ^ right.count)
        for index in 0..<max(left.count, right.count) {
            difference |= (index < left.count ? left[index] : 0) ^ (index < right.count ? right[index] : 0)
        }
        return difference == 0 && left.count == right.count
    }

    /// Reads no more from a connection: what was read is answered, then it is shut down.
    func stopReading(_ connection: Connection) {
        uv_read_stop(dc_stream(connection.handle))
        connection.peerFinished = true
    }

    private func submitPendingJobs() {
        guard !pendingJobs.isEmpty, let applyQueue else { return }
        let jobs = pendingJobs.swapAndClear()
        guard let outcomes = applyQueue.submit(jobs, mayApplyHere: jobs.allSatisfy(isFromAClientThatWaits)) else {
            return
        }
        // Applied at once on this thread: what the worker delivered before goes out first.
        for outcome in mailbox?.take() ?? [] {
            apply(outcome)
        }
        for outcome in outcomes {
            apply(outcome)
        }
    }

    /// Whether a job comes from a client with few unanswered requests (one at a time, or a
    /// window of them): its answers are what it waits for, so they should take the shortest path.
    private func isFromAClientThatWaits(_ job: Job) -> Bool {
        guard case .request(_, let address) = job, let connection = connections[address.connection] else {
            return false
        }
        return connection.outstandingRequests <= Self.waitingClientRequests
    }

    /// Unanswered requests up to which a client counts as waiting for its answers (a feed's
    /// window is 64; a pipelining writer has thousands in flight).
    private static let waitingClientRequests: UInt64 = 256

    /// Shuts the stream down once every request has its answer and every byte is written.
    func finishIfDone(_ connection: Connection) {
        guard connection.peerFinished, !connection.isClosing, connection.outstandingRequests == 0,
            !connection.hasOutbound, !connection.isWriting
        else { return }
        connection.markClosing()
        let request = UnsafeMutablePointer<uv_shutdown_t>.allocate(capacity: 1)
        request.initialize(to: uv_shutdown_t())
        let result = uv_shutdown(request, dc_stream(connection.handle)) { request, _ in
            guard let request else { return }
            let stream = request.pointee.handle
            request.deallocate()
            if let stream, let server = Server.from(stream), let connection = server.connection(of: stream) {
                server.close(connection)
            }
        }
        if result != 0 {
            request.deallocate()
            close(connection)
        }
    }

    func close(_ connection: Connection) {
        guard connections.removeValue(forKey: connection.id) != nil else { return }
        logger.debug("connection closed", metadata: ["connection": "\(connection.id)"])
        connection.markClosing()
        for name in connection.subscriptions.keys {
            subscribers[name]?.remove(connection.id)
        }
        connection.subscriptions = [:]
        dirty.remove(connection.id)
        uv_close(dc_handle(connection.handle)) { handle in handle.map { UnsafeMutableRawPointer($0).deallocate() } }
    }

    private func removeSubscription(of connection: Connection, to name: String) {
        connection.subscriptions[name] = nil
        subscribers[name]?.remove(connection.id)
        if subscribers[name]?.isEmpty == true { subscribers[name] = nil }
    }

    // MARK: - Writing

    func flushDirty() {
        repeat {
            for id in dirty {
                guard let connection = connections[id] else { continue }
                startWrite(connection)
                resumeReadingIfDrained(connection)
                finishIfDone(connection)
            }
            dirty.removeAll(keepingCapacity: true)
            // Connections that drained may have asked for catch-ups.
            submitPendingJobs()
        } while !dirty.isEmpty
    }

    /// Writes everything queued, unless a write is already in flight (its completion starts
    /// the next one). The bytes go straight to the socket first (`uv_try_write`): when the
    /// kernel takes them all, the usual case, the write costs no request, no callback and no
    /// change of what the loop polls for. What it does not take goes to a `uv_write`.
    private func startWrite(_ connection: Connection) {
        while !connection.isWriting, connection.hasOutbound, !connection.isClosing {
            let chunks = connection.takeOutbound(limit: Self.buffersPerWrite)
            let total = WriteBuffers.fill(&writeBuffers, with: chunks, skipping: 0)
            let written = writeBuffers.withUnsafeBufferPointer { buffers in
                uv_try_write(dc_stream(connection.handle), buffers.baseAddress, UInt32(buffers.count))
            }
            if Int(written) == total {
                connection.writeFinished(bytes: total)
                requestCatchUpsIfDrained(connection)
                continue
            }
            guard written >= 0 || written == UV_EAGAIN.rawValue else {
                connection.writeFinished(bytes: total)
                close(connection)
                return
            }
            let taken = Int(max(written, 0))
            connection.sent(bytes: taken)
            queueWrite(of: chunks, skipping: taken, to: connection)
            return
        }
    }

    /// Buffers taken for one vectored write.
    private static let buffersPerWrite = 512

    /// Hands the bytes of `chunks` after the first `skipped` to libuv, which writes them when
    /// the socket can take them; `didWrite` follows.
    private func queueWrite(of chunks: [SharedBytes], skipping skipped: Int, to connection: Connection) {
        let byteCount = WriteBuffers.fill(&writeBuffers, with: chunks, skipping: skipped)
        let context = WriteContext(connection: connection.id, chunks: chunks, byteCount: byteCount)
        let request = UnsafeMutablePointer<uv_write_t>.allocate(capacity: 1)
        request.initialize(to: uv_write_t())
        request.pointee.data = Unmanaged.passRetained(context).toOpaque()
        // libuv copies the buffer descriptors; the bytes stay alive in `context`.
        let result = writeBuffers.withUnsafeBufferPointer { buffers in
            uv_write(request, dc_stream(connection.handle), buffers.baseAddress, UInt32(buffers.count)) {
                request, status in
                guard let request, let data = request.pointee.data else { return }
                let context = Unmanaged<WriteContext>.fromOpaque(data).takeRetainedValue()
                let stream = request.pointee.handle
                request.deallocate()
                guard let stream, let server = Server.from(stream) else { return }
                server.didWrite(context, status: status)
            }
        }
        if result != 0 {
            Unmanaged<WriteContext>.fromOpaque(request.pointee.data).release()
            request.deallocate()
            connection.writeFinished(bytes: byteCount)
            close(connection)
        }
    }

    private func didWrite(_ context: WriteContext, status: Int32) {
        guard let connection = connections[context.connection] else { return }
        connection.writeFinished(bytes: context.byteCount)
        if status != 0 {
            close(connection)
            return
        }
        startWrite(connection)
        requestCatchUpsIfDrained(connection)
        resumeReadingIfDrained(connection)
        submitPendingJobs()
        finishIfDone(connection)
    }

    // MARK: - Outcomes

    private func drainMailbox() {
        guard let mailbox else { return }
        for outcome in mailbox.take() {
            apply(outcome)
        }
        submitPendingJobs()
        flushDirty()
    }

    private func apply(_ outcome: Outcome) {
        switch outcome {
        case .response(let address, let bytes):
            respond(address, bytes)
        case .acknowledged(let address, let bytes, let mark):
            respond(address, bytes, after: mark)
        case .published(let name, let from, let to, let event):
            fanOut(collection: name, from: from, to: to, event: event)
        case .subscribed(let address, let name, let version, let event, let response):
            guard let connection = connections[address.connection] else { return }
            if let event { queue(event, to: connection) }
            connection.subscriptions[name] = Subscription(version: version)
            subscribers[name, default: []].insert(connection.id)
            logger.debug(
                "subscribed",
                metadata: ["connection": "\(connection.id)", "collection": "\(name)", "version": "\(version)"])
            respond(address, response)
            connection.releaseAnswers()
        case .caughtUp(let id, let name, let version, let event):
            guard let connection = connections[id], connection.subscriptions[name] != nil else { return }
            counters.catchUps += 1
            metrics?.catchUps.increment()
            queue(event, to: connection)
            connection.subscriptions[name] = Subscription(version: version)
            connection.releaseAnswers()
        case .dropped(let name):
            let event = SharedBytes(WireEncoder.droppedEvent(collection: name))
            for id in subscribers.removeValue(forKey: name) ?? [] {
                guard let connection = connections[id] else { continue }
                connection.subscriptions[name] = nil
                queue(event, to: connection)
                connection.releaseAnswers()
            }
        case .listing(let address, let id, let rows):
            let bytes = WireEncoder.success(id: id, op: "list") { output in
                output.appendRaw(",\"collections\":[")
                for (index, row) in rows.enumerated() {
                    output.appendRaw(index == 0 ? "{\"name\":" : ",{\"name\":")
                    output.append(string: row.name)
                    Self.append(
                        [
                            (",\"version\":", row.version), (",\"sections\":", UInt64(row.sections)),
                            (",\"items\":", UInt64(row.items)),
                            (",\"subscribers\":", UInt64(subscribers[row.name]?.count ?? 0)),
                        ], to: &output)
                    output.appendRaw("}")
                }
                output.appendRaw("]")
            }
            respond(address, SharedBytes(bytes))
        case .statistics(let address, let id, let applied):
            respond(address, SharedBytes(statisticsResponse(id: id, applied)))
        case .storage(let reason):
            readOnlyReason = reason
            metrics?.readOnly.set(Int64(reason == nil ? 0 : 1))
            systemd.notify("STATUS=\(statusLine())")
        }
    }

    /// Appends `,"key":count` members (each key given with its comma, quotes and colon).
    private static func append(_ fields: [(StaticString, UInt64)], to output: inout JSONOutput) {
        for (key, value) in fields {
            output.appendRaw(key)
            output.append(value)
        }
    }

    private func statisticsResponse(id: JSONText?, _ applied: ApplyStatistics) -> [UInt8] {
        WireEncoder.success(id: id, op: "stats") { output in
            let fields: [(StaticString, UInt64)] = [
                (",\"connections\":", UInt64(connections.count)),
                (",\"connections_accepted\":", counters.connectionsAccepted),
                (",\"subscriptions\":", UInt64(subscribers.values.reduce(0) { $0 + $1.count })),
                (",\"collections\":", UInt64(applied.collections)),
                (",\"requests\":", counters.requests),
                (",\"writes_applied\":", applied.writesApplied),
                (",\"writes_rejected\":", applied.writesRejected),
                (",\"versions_published\":", applied.versionsPublished),
                (",\"apply_batches\":", applied.batches),
                (",\"events_queued\":", counters.eventsQueued),
                (",\"bytes_queued\":", counters.bytesQueued),
                (",\"catch_ups\":", counters.catchUps),
                (",\"slow_disconnects\":", counters.slowDisconnects),
                (",\"log_syncs\":", applied.logSyncs),
            ]
            Self.append(fields, to: &output)
            if let backbone = applied.backbone {
                output.appendRaw(",\"backbone\":{\"node\":")
                output.append(string: backbone.node)
                Self.append(
                    [
                        (",\"owned_collections\":", UInt64(backbone.ownedCollections)),
                        (",\"log_applied\":", backbone.logApplied),
                        (",\"writes_forwarded\":", backbone.writesForwarded),
                        (",\"log_skipped\":", backbone.logSkipped),
                        (",\"log_behind\":", backbone.logBehind),
                    ], to: &output)
                output.appendRaw("}")
            }
            output.appendRaw(",\"read_only\":")
            if let reason = applied.readOnlyReason {
                output.appendRaw("true,\"read_only_reason\":")
                output.append(string: reason)
            } else {
                output.appendRaw("false")
            }
        }
    }

    private func respond(_ address: ResponseAddress, _ bytes: SharedBytes, after mark: VersionMark? = nil) {
        guard let connection = connections[address.connection] else { return }
        connection.answer(slot: address.slot, bytes, after: mark)
        dirty.insert(connection.id)
    }

    private func queue(_ event: SharedBytes, to connection: Connection) {
        guard event.count > 0 else { return }
        counters.eventsQueued += 1
        counters.bytesQueued += UInt64(event.count)
        metrics?.eventsQueued.increment()
        metrics?.bytesQueued.increment(by: Int64(event.count))
        connection.enqueue(event: event)
        dirty.insert(connection.id)
    }

    /// Writes the same event bytes to every subscriber that holds `from`; one that is over its
    /// unsent-bytes limit is skipped and caught up once it drains (or disconnected, by policy).
    private func fanOut(collection name: String, from: UInt64, to: UInt64, event: SharedBytes) {
        guard let ids = subscribers[name] else { return }
        for id in ids {
            guard let connection = connections[id], let subscription = connection.subscriptions[name],
                !subscription.isLagging
            else { continue }
            if subscription.version == from && connection.unsentBytes <= configuration.maximumUnsentBytes {
                queue(event, to: connection)
                connection.subscriptions[name]?.version = to
                connection.releaseAnswers()
            } else if configuration.slowSubscriberPolicy == .disconnect {
                disconnectSlow(connection)
            } else {
                connection.subscriptions[name]?.isLagging = true
                requestCatchUpsIfDrained(connection)
            }
        }
    }

    /// Drops what is queued for a slow subscriber, sends it one error line and closes it once
    /// that is written.
    private func disconnectSlow(_ connection: Connection) {
        counters.slowDisconnects += 1
        metrics?.slowDisconnects.increment()
        logger.warning("disconnecting a slow subscriber", metadata: ["connection": "\(connection.id)"])
        for name in connection.subscriptions.keys {
            removeSubscription(of: connection, to: name)
        }
        stopReading(connection)
        connection.discardOutbound()
        let limit = configuration.maximumUnsentBytes
        queue(
            SharedBytes(
                WireEncoder.disconnectEvent(
                    code: "limit_exceeded",
                    message: "more than \(limit) bytes unsent (max_unsent_bytes): disconnected")),
            to: connection)
    }

    private func requestCatchUpsIfDrained(_ connection: Connection) {
        guard connection.unsentBytes <= configuration.maximumUnsentBytes / 2 else { return }
        for (name, subscription) in connection.subscriptions
        where subscription.isLagging && !subscription.catchUpRequested {
            connection.subscriptions[name]?.catchUpRequested = true
            pendingJobs.append(.catchUp(connection: connection.id, collection: name, since: subscription.version))
        }
    }

    private func check(_ result: Int32, _ what: String) throws {
        if result != 0 { throw ServerError.libuv(what, result) }
    }
}

/// Keeps the bytes of one queued write alive until libuv's write callback.
final class WriteContext {
    let connection: ConnectionID
    let chunks: [SharedBytes]
    /// The bytes handed to libuv (the chunks' bytes less what was written before).
    let byteCount: Int

    init(connection: ConnectionID, chunks: [SharedBytes], byteCount: Int) {
        self.connection = connection
        self.chunks = chunks
        self.byteCount = byteCount
    }
}

/// Describes queued chunks as libuv buffers for one vectored write.
enum WriteBuffers {
    /// A `uv_buf_t` holds at most 4 GiB: a larger event (a snapshot of a huge collection) is
    /// written as several buffers.
    static let largestBuffer = 1 << 30

    /// Replaces `buffers` with the bytes of `chunks` after the first `skipped`, and returns
    /// how many bytes they describe.
    static func fill(_ buffers: inout [uv_buf_t], with chunks: [SharedBytes], skipping skipped: Int) -> Int {
        buffers.removeAll(keepingCapacity: true)
        var toSkip = skipped
        var total = 0
        for chunk in chunks {
            var offset = min(toSkip, chunk.count)
            toSkip -= offset
            while offset < chunk.count {
                let length = min(chunk.count - offset, largestBuffer)
                buffers.append(
                    uv_buf_init((chunk.pointer + offset).assumingMemoryBound(to: CChar.self), UInt32(length)))
                offset += length
                total += length
            }
        }
        return total
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

import CLibUV
import DiffcastAccess
import DiffcastCore
import DiffcastEngine
import DiffcastHTTP
import DiffcastWire
import Glibc
import Logging

/// Accepting connections and reading them: access lists, backpressure, one request line at a
/// time into the apply queue, and closing.
extension Server {
    // MARK: - Connections

    /// Takes a stream accepted at `endpoint`: a line client (the socket, `--tcp`), one of the
    /// HTTP front end, or a metrics scraper.
    func accept(_ handle: UnsafeMutableRawPointer, at endpoint: Endpoint) {
        lastConnectionID += 1
        if endpoint != .metrics {
            // A scrape is no client: the counts say what clients did.
            counters.connectionsAccepted += 1
        }
        logger.debug(
            "connection accepted", metadata: ["connection": "\(lastConnectionID)", "endpoint": "\(endpoint)"])
        let connection = Connection(
            id: lastConnectionID, handle: handle, maximumLineBytes: configuration.maximumLineBytes, endpoint: endpoint)
        connection.peer = endpoint.isTCP ? nil : PeerCredentials(stream: handle)
        if endpoint.isTCP, configuration.tcpSendBufferBytes > 0 {
            var size = Int32(clamping: configuration.tcpSendBufferBytes)
            _ = setsockopt(
                connection.descriptor, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        connection.peerAddress = peerAddress(of: connection)
        var lookups = PeerGroupLookups()
        connection.holder = Holder(
            initialCredential(of: connection, lookups: &lookups), anonymous: configuration.anonymousRights)
        if endpoint.isHTTP {
            connection.transport = .http(
                HTTPExchanges(reader: httpRequestReader(), servesMetricsOnly: endpoint == .metrics))
        }
        connections[connection.id] = connection
        LoopHandles.setTag(UInt(connection.id), of: handle)
        guard connections.count <= configuration.maximumConnections else {
            logger.warning(
                "refusing a connection", metadata: ["limit": "max_connections \(configuration.maximumConnections)"])
            let error = DiffcastError.limitExceeded(
                "max_connections (\(configuration.maximumConnections)) clients connected")
            connection.enqueue(SharedBytes(WireEncoder.disconnectEvent(code: error.code, message: error.message)))
            connection.finish()
            needsWrite(connection)
            flushMarked()
            return
        }
        startReading(connection)
    }

    /// Reads a connection (again); one whose socket cannot be read is closed.
    func startReading(_ connection: Connection) {
        connection.resumeReading()
        let result = uv_read_start(
            dc_stream(connection.handle),
            { handle, _, buffer in
                guard let server = Server.from(handle), let buffer else { return }
                guard let start = server.readBuffer.baseAddress else { return }
                buffer.pointee = LoopHandles.buffer(start, count: server.readBuffer.count)
            },
            { stream, count, _ in
                guard let stream, let server = Server.from(stream) else { return }
                server.didRead(stream: stream, count: count)
            })
        if result != 0 {
            logger.warning(
                "cannot read a connection; closing it",
                metadata: ["connection": "\(connection.id)", "error": "\(String(cString: uv_strerror(result)))"])
            close(connection)
        }
    }

    /// Requests outstanding at the apply queue on one connection: past the high mark it is read
    /// no further until they drain to the low one.
    static let outstandingRequests = WaterMarks(high: 65_536)

    /// A connection's unsent bytes: past the high mark (`max_unsent_bytes`) it is read no further
    /// until they drain to the low one.
    var unsentBytes: WaterMarks { WaterMarks(high: configuration.maximumUnsentBytes) }

    /// Backpressure: a client that sends faster than it reads its answers is not read until it
    /// has drained, so neither its responses nor its queued requests grow without bound.
    func pauseReadingIfFlooded(_ connection: Connection) {
        guard connection.phase == .reading else { return }
        if unsentBytes.isAbove(connection.unsentBytes)
            || Self.outstandingRequests.isAbove(Int(clamping: connection.outstandingRequests))
        {
            uv_read_stop(dc_stream(connection.handle))
            connection.pauseReading()
        }
    }

    func resumeReadingIfDrained(_ connection: Connection) {
        guard connection.isReadingPaused,
            unsentBytes.hasDrained(connection.unsentBytes),
            Self.outstandingRequests.hasDrained(Int(clamping: connection.outstandingRequests))
        else { return }
        startReading(connection)
    }

    func connection(of handle: UnsafeMutableRawPointer) -> Connection? {
        connections[ConnectionID(LoopHandles.tag(of: handle))]
    }

    func didRead(stream: UnsafeMutablePointer<uv_stream_t>, count: Int) {
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
        needsWrite(connection)
        submitPendingJobs()
        flushMarked()
        pauseReadingIfFlooded(connection)
    }

    /// A line over `max_line_bytes` is answered `line_too_long` and skipped; the connection goes on.
    func answerLineTooLong(on connection: Connection) {
        let slot = connection.reserveSlot()
        let error = DiffcastError.lineTooLong(limit: configuration.maximumLineBytes)
        reject(error, id: nil, op: nil, slot: slot, on: connection)
    }

    /// Answers a request refused before it reaches the apply queue with its error, and logs it
    /// as the engine logs the ones it refuses ("request rejected", at debug).
    func reject(_ error: DiffcastError, id: JSONText?, op: String?, slot: UInt64, on connection: Connection) {
        connection.answer(slot: slot, SharedBytes(WireEncoder.failure(id: id, op: op, error: error)))
        logger.debug(
            "request rejected",
            metadata: [
                "op": "\(op ?? "-")", "code": "\(error.code)", "message": "\(error.message)",
                "connection": "\(connection.id)",
            ])
    }

    func handleLine(_ line: UnsafeBufferPointer<UInt8>, from connection: Connection) {
        // Lines after a policy stop (too many wrong tokens, a slow-subscriber disconnect) that
        // arrived in the same read are not answered.
        guard !connection.isFinishing else { return }
        if line.allSatisfy({ $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\r") || $0 == UInt8(ascii: "\t") }) {
            return
        }
        counters.requests += 1
        let slot = connection.reserveSlot()
        let address = ResponseAddress(connection: connection.id, slot: slot)
        let request: Request
        do {
            request = try parser.parse(line, reusing: &parseWorkspace)
        } catch {
            return reject(error.error, id: error.id, op: error.op, slot: slot, on: connection)
        }
        if refuses(request, slot: slot, on: connection) { return }
        switch request.command {
        case .ping:
            connection.answer(slot: slot, SharedBytes(WireEncoder.success(id: request.id, op: request.op)))
        case .auth(let token):
            authenticate(token, request, slot: slot, on: connection)
        case .unsubscribe(let name):
            fanOut.removeSubscription(of: connection, to: name, tellingTheEngine: true)
            connection.answer(slot: slot, SharedBytes(WireEncoder.success(id: request.id, op: request.op)))
            connection.releaseAnswers()
        case .drop(let name):
            logDrop(name, on: connection)
            pendingJobs.append(.request(request, address))
        case .write, .get, .window:
            pendingJobs.append(.request(request, address))
        case .subscribe, .list, .stats:
            pendingJobs.append(.request(scoped(request, for: connection.holder), address))
        }
    }

    /// Wrong tokens a connection may present before it is closed.
    static let authenticationAttempts = 3

    /// Reads no more from a connection: what was read is answered, then it is shut down.
    func stopReading(_ connection: Connection) {
        uv_read_stop(dc_stream(connection.handle))
        connection.finish()
    }

    func submitPendingJobs() {
        guard !pendingJobs.isEmpty, let applyQueue else { return }
        let jobs = pendingJobs.swapAndClear()
        // Room for as many as came this time (a feed's reads are alike), not grown job by job.
        pendingJobs.reserveCapacity(jobs.count)
        guard let outcomes = applyQueue.submit(jobs, mayApplyHere: areFromClientsThatWait(jobs)) else {
            return
        }
        // Applied at once on this thread: what the worker delivered before goes out first.
        for outcome in mailbox?.take() ?? [] {
            deliver(outcome)
        }
        deliverAppliedHere(outcomes)
    }

    /// Whether every job comes from a client with few unanswered requests (one at a time, or a
    /// window of them): their answers are what they wait for, so they should take the shortest
    /// path. A run of jobs from one connection (a feed's window) looks the connection up once.
    func areFromClientsThatWait(_ jobs: [Job]) -> Bool {
        var waiting: ConnectionID?
        for job in jobs {
            guard case .request(_, let address) = job else { return false }
            if address.connection == waiting { continue }
            guard let connection = connections[address.connection],
                connection.outstandingRequests <= Self.waitingClientRequests
            else { return false }
            waiting = address.connection
        }
        return true
    }

    /// Unanswered requests up to which a client counts as waiting for its answers (a feed's
    /// window is 64; a pipelining writer has thousands in flight).
    static let waitingClientRequests: UInt64 = 256

    /// Shuts the stream down once every request has its answer and every byte is written.
    func finishIfDone(_ connection: Connection) {
        guard connection.phase == .finishing, connection.outstandingRequests == 0,
            !connection.hasOutbound, !connection.pending.isWriting
        else { return }
        connection.markClosing()
        let request = LoopHandles.makeShutdown()
        let result = uv_shutdown(request, dc_stream(connection.handle)) { request, _ in
            guard let request else { return }
            let stream = request.pointee.handle
            LoopHandles.free(request)
            if let stream, let server = Server.from(stream), let connection = server.connection(of: stream) {
                server.close(connection)
            }
        }
        if result != 0 {
            LoopHandles.free(request)
            close(connection)
        }
    }

    func close(_ connection: Connection) {
        guard connections.removeValue(forKey: connection.id) != nil else { return }
        logger.debug("connection closed", metadata: ["connection": "\(connection.id)"])
        connection.markClosing()
        if let subject = connection.holder.subject { releaseSubject(subject) }
        tokenHolders.remove(connection.id)
        fanOut.removeSubscriptions(of: connection)
        schedule.stopWaiting(connection)
        LoopHandles.close(connection.handle)
    }

    /// Connections of clients (scrapes of the metrics listener are not counted).
    var clientConnectionCount: Int {
        connections.values.count { !$0.servesMetricsOnly }
    }
}

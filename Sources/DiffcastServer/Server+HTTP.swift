import CLibUV
import DiffcastAccess
import DiffcastEngine
import DiffcastHTTP
import DiffcastWire

/// The HTTP front end (`--http`): a second transport on the server's own connections. An HTTP
/// request becomes protocol request lines, run exactly as on the socket (same parser, access
/// rules, ordering and read-your-writes); their answers become its response. An event stream
/// (Server-Sent Events) or a WebSocket turns the connection into a subscriber or a line client,
/// and the fan-out, with its slow-subscriber policy, serves it unchanged: only the framing of
/// what `Connection` queues differs (`Transport`).
extension Server {
    func httpRequestReader() -> HTTPRequestReader {
        HTTPRequestReader(maximumHeadBytes: 16 * 1024, maximumBodyBytes: configuration.maximumLineBytes)
    }

    /// Bytes from a connection whose transport is HTTP or what an HTTP request made of it.
    func readHTTP(_ bytes: UnsafeRawBufferPointer, from connection: Connection) {
        switch connection.transport {
        case .lines, .eventStream:
            // An event stream only writes; what its client sends is not read.
            return
        case .webSocket(let codec):
            readWebSocket(bytes, codec, connection)
        case .http(let exchanges):
            let output = exchanges.reader.feed(bytes)
            for request in output.requests {
                guard case .http = connection.transport, !connection.isFinishing else { break }
                serve(request, on: connection)
            }
            if let failure = output.failure, case .http = connection.transport, !connection.isFinishing {
                refuse(failure, on: connection)
            }
            if let rest = output.upgradeBytes, !rest.isEmpty, case .webSocket(let codec) = connection.transport {
                rest.withUnsafeBytes { readWebSocket($0, codec, connection) }
            }
        }
    }

    /// Bytes that are not HTTP this daemon serves: a 4xx, then the connection closes.
    private func refuse(_ failure: HTTPRequestReader.Failure, on connection: Connection) {
        logger.debug("bad HTTP", metadata: ["connection": "\(connection.id)", "error": "\(failure.message)"])
        let response = HTTPResponse.error(failure.status, code: "parse_error", failure.message)
        respond(response, keepAlive: false, corsOrigin: nil, on: connection)
        stopReading(connection)
    }

    private func serve(_ request: HTTPRequest, on connection: Connection) {
        let router = HTTPRouter(allowedOrigins: configuration.httpOrigins)
        let metricsOnly = connection.servesMetricsOnly
        let cors = metricsOnly ? nil : router.corsOrigin(for: request)
        let route = metricsOnly ? HTTPRouter.metricsRoute(request) : router.route(request)
        if !metricsOnly, let refusal = httpRefusal(of: request, routedTo: route, by: router, on: connection) {
            respond(refusal, keepAlive: request.keepAlive, corsOrigin: cors, on: connection)
            return needsWrite(connection)
        }
        switch route {
        case .metrics:
            refreshMetricGauges?()
            let body = metrics?.exposition() ?? []
            let response = HTTPResponse(
                status: 200, contentType: "text/plain; version=0.0.4; charset=utf-8", body: body)
            respond(response, keepAlive: request.keepAlive, corsOrigin: nil, on: connection)
        case .respond(let response):
            respond(response, keepAlive: request.keepAlive, corsOrigin: cors, on: connection)
        case .requests(let lines, let batch):
            for (index, line) in lines.enumerated() {
                let part: HTTPExchange.Part =
                    batch ? .batchPart(first: index == 0, last: index == lines.count - 1) : .only
                let exchange = HTTPExchange(
                    part: part, keepAlive: request.keepAlive, corsOrigin: cors,
                    presentedToken: connection.holder.presentedToken)
                run(line, on: connection, as: exchange)
            }
        case .eventStream(let subscribe, let form):
            startEventStream(subscribe, form: form, for: request, corsOrigin: cors, on: connection)
        case .webSocket(let accept, let form):
            startWebSocket(accept: accept, form: form, for: request, on: connection)
        }
        needsWrite(connection)
    }

    /// Answers a request for an event stream with the stream's head, and subscribes the
    /// connection as its `subscribe` line asks; a refusal (the token's rights) is answered as
    /// a plain response instead.
    private func startEventStream(
        _ subscribe: [UInt8], form: EventForm, for request: HTTPRequest, corsOrigin cors: String?,
        on connection: Connection
    ) {
        guard connection.outstandingRequests == 0 else { return refuseSwitch(request, on: connection) }
        if let refusal = streamRefusal(subscribe, on: connection) {
            respond(refusal, keepAlive: request.keepAlive, corsOrigin: cors, on: connection)
            return
        }
        connection.enqueue(
            SharedBytes(
                HTTPResponse.streamingHead(
                    status: 200, contentType: "text/event-stream", chunked: false, corsOrigin: cors)))
        connection.transport = .eventStream
        connection.eventForm = form
        sendWithoutDelay(connection)
        subscribe.withUnsafeBufferPointer { handleLine($0, from: connection) }
    }

    /// Switches the connection to WebSocket: the 101 with its `Sec-WebSocket-Accept`, then
    /// messages read as request lines.
    private func startWebSocket(accept: String, form: EventForm, for request: HTTPRequest, on connection: Connection) {
        guard connection.outstandingRequests == 0 else { return refuseSwitch(request, on: connection) }
        let head =
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Accept: \(accept)\r\n\r\n"
        connection.enqueue(SharedBytes(Array(head.utf8)))
        // Messages up to twice the line limit are read, so that a long one is answered
        // `line_too_long` as on the socket; a longer one closes the WebSocket (1009).
        let limit = configuration.maximumLineBytes
        connection.transport = .webSocket(
            WebSocketCodec(maximumMessageBytes: limit > Int.max / 2 ? Int.max : 2 * limit))
        connection.eventForm = form
        sendWithoutDelay(connection)
    }

    /// An event stream its holder may not read is refused with a status (401 or 403) before the
    /// stream starts; what else is wrong with it is answered as an `error` event.
    private func streamRefusal(_ line: [UInt8], on connection: Connection) -> HTTPResponse? {
        guard let request = try? line.withUnsafeBufferPointer({ try parser.parse($0, reusing: &parseWorkspace) }),
            case .unauthorized(let refusal) = LineCheck.refusal(of: request, by: connection.holder, carriesEvents: true)
        else { return nil }
        logDenial(op: request.op, collection: refusal.collection, reason: refusal.message, on: connection)
        let presented = connection.holder.presentedToken
        return .error(
            presented ? 403 : 401, code: "unauthorized", refusal.message,
            headers: presented ? [] : ["WWW-Authenticate: Bearer"])
    }

    /// A response the router made, in its turn among the connection's answers.
    private func respond(_ response: HTTPResponse, keepAlive: Bool, corsOrigin: String?, on connection: Connection) {
        let exchange = HTTPExchange(part: .response, keepAlive: keepAlive, corsOrigin: corsOrigin)
        let slot = connection.reserveSlot(answeredAs: exchange)
        connection.answer(slot: slot, SharedBytes(response.encoded(keepAlive: keepAlive, corsOrigin: corsOrigin)))
        needsWrite(connection)
    }

    /// An event stream or a WebSocket cannot follow requests still being answered on the same
    /// connection (their answers would be framed for the new transport).
    private func refuseSwitch(_ request: HTTPRequest, on connection: Connection) {
        let response = HTTPResponse.error(
            400, code: "invalid_argument", "an event stream or a WebSocket must not follow pipelined requests")
        respond(response, keepAlive: false, corsOrigin: nil, on: connection)
        stopReading(connection)
    }

    /// Runs one protocol line whose answer is (part of) an HTTP response.
    private func run(_ line: [UInt8], on connection: Connection, as exchange: HTTPExchange) {
        guard case .http(let exchanges) = connection.transport else { return }
        let slotsBefore = connection.nextSlot
        exchanges.pending.append(exchange)
        line.withUnsafeBufferPointer { handleLine($0, from: connection) }
        // A line that reserved no slot gets no answer, so its exchange must go too.
        if connection.nextSlot == slotsBefore { exchanges.pending.removeLast() }
    }

    private func readWebSocket(_ bytes: UnsafeRawBufferPointer, _ codec: WebSocketCodec, _ connection: Connection) {
        let received = codec.feed(bytes)
        if !received.reply.isEmpty { connection.enqueue(SharedBytes(received.reply)) }
        for message in received.messages {
            if message.count > configuration.maximumLineBytes {
                answerLineTooLong(on: connection)
            } else {
                message.withUnsafeBufferPointer { handleLine($0, from: connection) }
            }
        }
        if received.isFinished { stopReading(connection) }
        needsWrite(connection)
    }

    /// Turns Nagle off on a stream that lingers: the linger already coalesces its events, and a
    /// segment Nagle held would wait for the subscriber's delayed ACK.
    private func sendWithoutDelay(_ connection: Connection) {
        guard lingerTimer != nil, connection.isTCP else { return }
        _ = uv_tcp_nodelay(LoopHandles.tcp(connection.handle), 1)
    }

    /// A comment on every event stream, so that proxies keep idle ones open.
    func sendHeartbeats() {
        for connection in connections.values {
            guard case .eventStream = connection.transport else { continue }
            connection.enqueue(SharedBytes(ServerSentEvents.heartbeat))
            needsWrite(connection)
        }
        flushMarked()
    }
}

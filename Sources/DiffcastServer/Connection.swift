import CLibUV
import DiffcastAccess
import DiffcastCore
import DiffcastEngine
import DiffcastHTTP
import DiffcastWire

/// One client stream on the loop thread: frames requests in, sends responses in request order,
/// and queues outbound bytes, framed for its transport. It knows nothing of collections;
/// `Server` decides what to send.
final class Connection: WriteScheduled, Identifiable {
    let id: ConnectionID
    /// A `uv_pipe_t` or `uv_tcp_t`, allocated and zeroed by us, freed in its close callback.
    let handle: UnsafeMutableRawPointer
    var framer: LineFramer
    /// How requests arrive and answers and events leave: lines, or HTTP and what it became.
    var transport: Transport = .lines
    /// How an event stream or a WebSocket sends changesets: as the socket does, or compact
    /// (`CompactEvents`), as the page asked when it connected.
    var eventForm: EventForm = .full
    /// Subscriptions of this connection by collection name.
    var subscriptions = SubscriptionTable()
    /// Whether a subscription may be `lagging` (awaiting the request of its catch-up): set by
    /// `FanOut` whenever it stores one, cleared when it requests their catch-ups. False is exact,
    /// so the check after every write costs a flag, not a walk of `subscriptions`.
    var mayHaveLaggingSubscriptions = false
    /// What the peer presented and may do (SPEC.md "Scoped access"), decided when it connects,
    /// at `auth`, on each HTTP request, at a token's expiry and at a reload: not per request.
    var holder = Holder(.anonymous, anonymous: .none)
    /// Who the peer is, for Unix sockets.
    var peer: PeerCredentials?
    /// The peer's address (`IP:PORT` over TCP, `uid N` on the Unix socket), for logs and for
    /// slowing down refused tokens.
    var peerAddress = ""
    /// The client behind a trusted proxy, from the last HTTP request's `X-Forwarded-For`.
    var forwardedFor: String?
    /// Where it stands in the server's `WriteSchedule`.
    var scheduled = WriteScheduleEntry()

    private(set) var nextSlot: UInt64 = 0
    private var nextSlotToSend: UInt64 = 0
    private var answeredOutOfTurn: [UInt64: PendingAnswer] = [:]
    /// Failed `auth` attempts; past a few the connection is closed.
    var failedAuthentications = 0
    /// What is queued to go out and the write in progress.
    var pending = PendingWrites()
    private(set) var phase = Phase.reading

    /// Where it arrived: how it is read, and who it may be.
    let endpoint: Endpoint
    /// Over TCP (`--tcp`, `--http`, `--metrics`), not the Unix socket.
    var isTCP: Bool { endpoint.isTCP }

    /// The socket under `handle` (-1 if libuv cannot say), for the loop's own `send`s.
    let descriptor: Int32

    init(id: ConnectionID, handle: UnsafeMutableRawPointer, maximumLineBytes: Int, endpoint: Endpoint) {
        self.id = id
        self.endpoint = endpoint
        self.handle = handle
        var descriptor: uv_os_fd_t = -1
        self.descriptor = uv_fileno(dc_handle(handle), &descriptor) == 0 ? descriptor : -1
        self.framer = LineFramer(maximumLineBytes: maximumLineBytes)
    }

    /// Bytes queued or being written but not yet taken by the kernel.
    var unsentBytes: Int { pending.unsentBytes }

    /// Requests read whose responses have not been queued yet.
    var outstandingRequests: UInt64 { nextSlot - nextSlotToSend }

    /// Where a connection is in its life. The transitions are the methods below:
    /// reading ⇄ paused (`pauseReading`, `resumeReading`), reading or paused → finishing
    /// (`finish`), any → closing (`markClosing`).
    enum Phase: Equatable {
        /// Requests are read.
        case reading
        /// Not read for now (backpressure): the peer sends faster than it reads its answers.
        case paused
        /// Read no more (the peer's EOF, a policy stop, an HTTP exchange that ends it): what was
        /// read is answered, then the stream is shut down.
        case finishing
        /// Shutting down or closed: nothing more is queued.
        case closing
    }

    /// Reading stopped for backpressure.
    var isReadingPaused: Bool { phase == .paused }
    /// No more requests are taken: finishing or closing.
    var isFinishing: Bool { phase == .finishing || phase == .closing }
    var isClosing: Bool { phase == .closing }

    func pauseReading() {
        if phase == .reading { phase = .paused }
    }

    func resumeReading() {
        if phase == .paused { phase = .reading }
    }

    /// Takes no more requests; answers what was read, then shuts down.
    func finish() {
        if phase == .reading || phase == .paused { phase = .finishing }
    }

    var hasOutbound: Bool { !pending.isEmpty }

    /// Whether a write may start now: something is queued, no write is in flight (its
    /// completion starts the next), and the connection is not closing.
    var mayStartWrite: Bool { !pending.isWriting && hasOutbound && !isClosing }

    /// Whether this is a scrape of the metrics listener rather than a client.
    var servesMetricsOnly: Bool {
        if case .http(let exchanges) = transport { return exchanges.servesMetricsOnly }
        return false
    }

    func reserveSlot() -> UInt64 {
        defer { nextSlot += 1 }
        return nextSlot
    }

    /// Reserves the slot of a request that HTTP answers as `exchange`.
    func reserveSlot(answeredAs exchange: HTTPExchange) -> UInt64 {
        if case .http(let exchanges) = transport { exchanges.pending.append(exchange) }
        return reserveSlot()
    }

    /// Places a response; it is sent once every earlier request has been answered and, for a
    /// write, once this connection has been sent the event of the version it names (read your
    /// writes, also while the connection is behind and waits for a catch-up).
    ///
    /// With `requests` above 1 it answers the requests in that many slots from `slot`, each with
    /// `response` (a run of a pipelining writer's acknowledgements).
    func answer(slot: UInt64, _ response: SharedBytes, requests: Int = 1, after event: VersionMark? = nil) {
        guard slot >= nextSlotToSend else { return }
        // The usual case, an answer in turn, goes out without a detour through the dictionary.
        if slot == nextSlotToSend, hasBeenSent(event) {
            enqueue(answer: response, requests: requests)
            nextSlotToSend += UInt64(requests)
        } else {
            answeredOutOfTurn[slot] = PendingAnswer(bytes: response, requests: requests, after: event)
        }
        releaseAnswers()
    }

    /// Sends the answers that are next in turn and whose events have been queued; call it
    /// whenever a subscription of this connection moves on. Whether it queued any.
    ///
    /// A fan-out asks it of every subscriber at every version, and nearly always no answer
    /// waits: that case is decided inline, without a call.
    @discardableResult @inline(__always)
    func releaseAnswers() -> Bool {
        answeredOutOfTurn.isEmpty ? false : releaseAnswersWaiting()
    }

    private func releaseAnswersWaiting() -> Bool {
        let queuedBefore = nextSlotToSend
        while let ready = answeredOutOfTurn[nextSlotToSend], hasBeenSent(ready.after) {
            answeredOutOfTurn[nextSlotToSend] = nil
            enqueue(answer: ready.bytes, requests: ready.requests)
            nextSlotToSend += UInt64(ready.requests)
        }
        return nextSlotToSend != queuedBefore
    }

    /// Whether the event bringing `mark`'s version has been queued here, or need not be (the
    /// connection does not follow that collection).
    private func hasBeenSent(_ mark: VersionMark?) -> Bool {
        guard let mark, let subscription = subscriptions[mark.collection] else { return true }
        // A windowed subscriber that is not behind has been sent every event up to the last
        // version published, and no event is due for a version that left its view as it was.
        if subscription.window != nil && !subscription.isLagging { return true }
        return subscription.version >= mark.version
    }

    func enqueue(_ bytes: SharedBytes, isAnswer: Bool = false) {
        guard bytes.count > 0, !isClosing else { return }
        pending.append(bytes, isAnswer: isAnswer)
    }

    private func enqueue(_ bytes: [UInt8], isAnswer: Bool = false) {
        enqueue(SharedBytes(bytes), isAnswer: isAnswer)
    }

    /// Queues an event, framed for the transport (the framed bytes are shared by every
    /// subscriber the event goes to).
    func enqueue(event: FramedEvent) {
        switch transport {
        case .lines, .http: enqueue(event.line)
        case .eventStream:
            enqueue(eventForm == .compact ? event.asCompactServerSentEvent : event.asServerSentEvent)
        case .webSocket(let codec):
            guard codec.maySend else { return }
            enqueue(eventForm == .compact ? event.asCompactWebSocketFrame : event.asWebSocketFrame)
        }
    }

    /// Queues the same answer to `requests` requests in turn: on a socket as one buffer of
    /// lines, on HTTP and WebSocket framed one by one.
    private func enqueue(answer: SharedBytes, requests: Int) {
        if requests > 1, case .lines = transport { return enqueue(answer: SharedBytes(answer, times: requests)) }
        for _ in 0..<requests { enqueue(answer: answer) }
    }

    /// Queues the answer next in turn, framed for the transport.
    private func enqueue(answer: SharedBytes) {
        switch transport {
        case .lines: enqueue(answer, isAnswer: true)
        case .webSocket(let codec): enqueue(answer.withUnsafeBytes(codec.frame), isAnswer: true)
        case .eventStream:
            // The stream's events say what the subscribe's success would; a refusal is sent as
            // an `error` event, and the stream ends.
            guard answer.withUnsafeBytes(HTTPResponse.status(ofAnswer:)) != 200 else { return }
            enqueue(Array("event: error\ndata: ".utf8), isAnswer: true)
            enqueue(answer, isAnswer: true)
            enqueue(Self.newline, isAnswer: true)
            finish()
        case .http(let exchanges):
            guard !exchanges.pending.isEmpty else { return enqueue(answer, isAnswer: true) }
            let exchange = exchanges.pending.removeFirst()
            enqueue(exchange.frame(answer), isAnswer: true)
            if exchange.closesConnection { finish() }
        }
    }

    private static let newline = SharedBytes([UInt8(ascii: "\n")])

    /// Whether what is queued may wait for the next linger flush (`Server.flushLingering`): the
    /// events of a Server-Sent Events stream or a WebSocket, never an answer.
    var mayLinger: Bool {
        switch transport {
        case .eventStream, .webSocket: queuesOnlyEvents
        case .lines, .http: false
        }
    }

    /// Whether everything queued is events (a client waiting for an answer is written at once).
    var queuesOnlyEvents: Bool { !pending.holdsAnswer }

    func markClosing() {
        phase = .closing
        pending.discardQueued()
    }
}

/// How a connection's bytes are framed.
enum Transport {
    /// Request lines, answer and event lines (the Unix socket, TCP).
    case lines
    /// HTTP/1.1 requests; each answer becomes (part of) the response of the request it came from.
    case http(HTTPExchanges)
    /// An HTTP response that streams events as Server-Sent Events; nothing more is read.
    case eventStream
    /// A WebSocket: one protocol line per text message, both ways.
    case webSocket(WebSocketCodec)
}

/// The HTTP requests of a connection whose answers are not yet sent, in request order.
final class HTTPExchanges {
    let reader: HTTPRequestReader
    /// Whether the connection came to the metrics listener, which serves `/metrics` alone.
    let servesMetricsOnly: Bool
    var pending: [HTTPExchange] = []

    init(reader: HTTPRequestReader, servesMetricsOnly: Bool = false) {
        self.reader = reader
        self.servesMetricsOnly = servesMetricsOnly
    }
}

/// What one answer (one slot) is to its HTTP request.
struct HTTPExchange {
    enum Part {
        /// The answer is a whole HTTP response already.
        case response
        /// The answer is the body of the response; its error code sets the status.
        case only
        /// One of the answers of a batch (`POST /v1/requests`), sent as chunks of one response.
        case batchPart(first: Bool, last: Bool)
    }

    var part: Part
    var keepAlive: Bool
    var corsOrigin: String?
    /// Whether the request presented a valid token: a refusal is then 403, else 401.
    var presentedToken = true

    /// The connection closes after this answer.
    var closesConnection: Bool {
        switch part {
        case .response, .only: !keepAlive
        case .batchPart(_, let last): last && !keepAlive
        }
    }

    func frame(_ answer: SharedBytes) -> [UInt8] {
        let body = answer.bytes
        switch part {
        case .response:
            return body
        case .only:
            let status = answer.withUnsafeBytes(HTTPResponse.status(ofAnswer:))
            guard status == 403, !presentedToken else {
                return HTTPResponse(status: status, body: body).encoded(keepAlive: keepAlive, corsOrigin: corsOrigin)
            }
            return HTTPResponse(status: 401, body: body, headers: ["WWW-Authenticate: Bearer"])
                .encoded(keepAlive: keepAlive, corsOrigin: corsOrigin)
        case .batchPart(let first, let last):
            var bytes =
                first
                ? HTTPResponse.streamingHead(
                    status: 200, contentType: "application/x-ndjson", chunked: true, corsOrigin: corsOrigin) : []
            bytes += Array((String(body.count, radix: 16) + "\r\n").utf8) + body + Array("\r\n".utf8)
            if last { bytes += Array("0\r\n\r\n".utf8) }
            return bytes
        }
    }
}

/// An answer that waits for its turn (and perhaps for an event).
private struct PendingAnswer {
    let bytes: SharedBytes
    /// The requests it answers, in consecutive slots from its own.
    let requests: Int
    let after: VersionMark?
}

/// A connection's place in a collection's stream of versions.
struct Subscription {
    /// How events reach the subscriber; `FanOut` makes every transition:
    /// current → lagging (over its unsent-bytes limit, or not holding an event's `from`),
    /// lagging → catchingUp (drained to half the limit: a catch-up job is submitted),
    /// catchingUp → current (the catch-up arrived).
    enum Delivery: Equatable {
        /// Every version's event is queued as it is published.
        case current
        /// Events are skipped because the connection is behind.
        case lagging
        /// A catch-up from `version` was asked of the apply queue; events are still skipped.
        case catchingUp
    }

    /// The version of the last event queued to the connection (a windowed subscription: the
    /// version it is current through, kept while it is behind).
    var version: UInt64
    var delivery = Delivery.current
    /// For a windowed subscription, its window and the view it was last sent.
    var window: WindowedView?

    /// Events are being skipped; a catch-up follows.
    var isLagging: Bool { delivery != .current }

    /// What a version's event does to a whole subscription (`FanOut.publish`).
    enum Advance {
        /// The subscription moved to the new version: its event is to be queued.
        case advanced
        /// It does not hold the event's `from`, or its connection is over its unsent-bytes
        /// limit (`withinUnsentLimit` false): it falls behind.
        case behind
        /// It is behind already; a catch-up follows.
        case lagging
    }

    /// Moves a current subscription that holds `from` to `to`, in one dictionary access per
    /// subscriber and version.
    mutating func advance(from: UInt64, to: UInt64, withinUnsentLimit: Bool) -> Advance {
        guard !isLagging else { return .lagging }
        guard version == from && withinUnsentLimit else { return .behind }
        version = to
        return .advanced
    }
}

/// What a windowed subscriber holds: the view of `range` at `eventVersion`, the version of the
/// last event it was sent (the `from` of its next), as its window `group` showed it.
struct WindowedView {
    var group: WindowGroupID
    var eventVersion: UInt64
    var range: WindowRange
}

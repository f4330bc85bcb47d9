import DiffcastCore
import DiffcastWire
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// One connection to a daemon: requests answered in order (so they may be pipelined), and the
/// events of its subscriptions as an async sequence.
///
/// The socket is served by a thread of its own (`poll(2)` on the socket and a wake-up pipe), so
/// awaiting an answer or an event never blocks a cooperative thread, and a connection keeps
/// reading — and buffering events — while its owner is busy. Events are buffered without limit:
/// consume `events` of a subscribed connection, or the daemon's catch-up never gets its chance.
public final class DaemonConnection: Sendable {
    private let channel: Channel

    /// Every event line (`{"event":…}`) as received, in order; finishes when the connection ends.
    public let events: AsyncStream<JSONValue>

    private init(channel: Channel, events: AsyncStream<JSONValue>) {
        self.channel = channel
        self.events = events
    }

    /// Connects to the daemon; with `token`, authenticates first (TCP listeners need it).
    public static func connect(to endpoint: Endpoint, token: String? = nil) async throws(ClientError)
        -> DaemonConnection
    {
        let socket = try await Self.openSocket(endpoint)
        let (events, sink) = AsyncStream<JSONValue>.makeStream()
        let channel: Channel
        do {
            channel = try Channel(socket: socket, events: sink)
        } catch {
            Glibc.close(socket)
            throw error
        }
        let connection = DaemonConnection(channel: channel, events: events)
        if let token {
            _ = try await connection.call(.object([.init("op", .string("auth")), .init("token", .string(token))]))
        }
        return connection
    }

    /// Sends one request (a JSON object) and returns its response, `ok` or not.
    public func request(_ request: JSONValue) async throws(ClientError) -> JSONValue {
        try await pipeline([request])[0]
    }

    /// Sends the requests in one write and returns their responses in the same order.
    public func pipeline(_ requests: [JSONValue]) async throws(ClientError) -> [JSONValue] {
        guard !requests.isEmpty else { return [] }
        var bytes: [UInt8] = []
        for request in requests {
            var output = JSONOutput()
            output.append(request)
            bytes += output.bytes
            bytes.append(UInt8(ascii: "\n"))
        }
        let payload = bytes
        let result: Result<[JSONValue], ClientError> = await withCheckedContinuation { continuation in
            channel.submit(payload, expecting: requests.count, continuation)
        }
        return try result.get()
    }

    /// Sends one request and returns its response when `ok`; an error response is thrown as
    /// `ClientError.response`.
    @discardableResult
    public func call(_ request: JSONValue) async throws(ClientError) -> JSONValue {
        let response = try await self.request(request)
        try Self.check(response)
        return response
    }

    /// Throws an error response as `ClientError.response(code:message:)`.
    public static func check(_ response: JSONValue) throws(ClientError) {
        guard case .bool(false) = response["ok"] else { return }
        let error = response["error"]
        guard case .string(let code) = error?["code"] else {
            throw .protocolViolation("an error response without a code: \(response.canonicalText.prefix(200))")
        }
        var message = ""
        if case .string(let text) = error?["message"] { message = text }
        throw .response(code: code, message: message)
    }

    /// Ends the connection: answers not yet received fail with `disconnected`, `events` finishes.
    public func close() {
        channel.close()
    }

    deinit {
        channel.close()
    }

    /// A connected socket in blocking mode (made non-blocking by the channel). Connecting runs
    /// on a thread of its own: a TCP connect or a name lookup may take a while.
    private static func openSocket(_ endpoint: Endpoint) async throws(ClientError) -> Int32 {
        let result: Result<Int32, ClientError> = await withCheckedContinuation { continuation in
            Thread.detachNewThread { continuation.resume(returning: Self.openSocketBlocking(endpoint)) }
        }
        return try result.get()
    }

    private static func openSocketBlocking(_ endpoint: Endpoint) -> Result<Int32, ClientError> {
        switch endpoint {
        case .unix(let path):
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            let capacity = MemoryLayout.size(ofValue: address.sun_path)
            guard path.utf8.count < capacity else {
                return .failure(.cannotConnect(endpoint: path, cause: "the path is longer than \(capacity - 1) bytes"))
            }
            withUnsafeMutableBytes(of: &address.sun_path) { raw in
                raw.copyBytes(from: path.utf8)
                raw[path.utf8.count] = 0
            }
            let socket = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard socket >= 0 else {
                return .failure(.cannotConnect(endpoint: path, cause: String(cString: strerror(errno))))
            }
            let status = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.connect(socket, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
            guard status == 0 else {
                let code = errno
                Glibc.close(socket)
                return .failure(.cannotConnect(endpoint: path, cause: ClientError.unixConnectCause(code, path: path)))
            }
            return .success(socket)
        case .tcp(let host, let port):
            var hints = addrinfo()
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
            var list: UnsafeMutablePointer<addrinfo>?
            let lookup = getaddrinfo(host, String(port), &hints, &list)
            guard lookup == 0, let first = list else {
                return .failure(
                    .cannotConnect(endpoint: endpoint.description, cause: String(cString: gai_strerror(lookup))))
            }
            defer { freeaddrinfo(list) }
            var cause = "no address"
            var candidate: UnsafeMutablePointer<addrinfo>? = first
            while let info = candidate {
                candidate = info.pointee.ai_next
                let socket = Glibc.socket(
                    info.pointee.ai_family, info.pointee.ai_socktype | Int32(SOCK_CLOEXEC.rawValue),
                    info.pointee.ai_protocol)
                guard socket >= 0 else { continue }
                if Glibc.connect(socket, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0 {
                    var one: Int32 = 1
                    setsockopt(socket, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
                    return .success(socket)
                }
                cause =
                    errno == ECONNREFUSED
                    ? "connection refused: is diffcastd listening there (--tcp)?" : String(cString: strerror(errno))
                Glibc.close(socket)
            }
            return .failure(.cannotConnect(endpoint: endpoint.description, cause: cause))
        }
    }
}

/// The socket, its I/O thread and what waits on it. Requests are queued with the number of
/// responses they expect; responses arrive in request order (SPEC.md), so a FIFO of waiters
/// pairs them without looking at ids.
private final class Channel: Sendable {
    private struct Waiter {
        var expected: Int
        var received: [JSONValue] = []
        let continuation: CheckedContinuation<Result<[JSONValue], ClientError>, Never>
    }

    private struct State {
        var outbox: [UInt8] = []
        var waiters: [Waiter] = []
        var firstWaiter = 0
        /// Why the connection ended; set once, by `close()` or by the I/O thread.
        var ended: ClientError?
        var threadDone = false
    }

    private let socket: Int32
    /// A pipe that wakes the I/O thread from `poll`: it reads `wakeup`, others write `wakeupSender`.
    private let wakeup: Int32
    private let wakeupSender: Int32
    private let events: AsyncStream<JSONValue>.Continuation
    private let state = Locked(State())

    init(socket: Int32, events: AsyncStream<JSONValue>.Continuation) throws(ClientError) {
        var pipe: [Int32] = [-1, -1]
        guard Glibc.pipe(&pipe) == 0 else { throw .disconnected("pipe: \(String(cString: strerror(errno)))") }
        for end in pipe + [socket] {
            _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
        }
        self.socket = socket
        self.wakeup = pipe[0]
        self.wakeupSender = pipe[1]
        self.events = events
        Thread.detachNewThread { [self] in serve() }
    }

    func submit(
        _ bytes: [UInt8], expecting count: Int,
        _ continuation: CheckedContinuation<Result<[JSONValue], ClientError>, Never>
    ) {
        let refused: ClientError? = state.withLock { state in
            if let ended = state.ended { return ended }
            state.outbox += bytes
            state.waiters.append(Waiter(expected: count, continuation: continuation))
            return nil
        }
        if let refused {
            continuation.resume(returning: .failure(refused))
        } else {
            wake()
        }
    }

    func close() {
        let first = state.withLock { state in
            guard state.ended == nil else { return false }
            state.ended = .disconnected("the connection was closed")
            return true
        }
        if first { wake() }
    }

    /// Signals the I/O thread, unless it has already closed the pipe. A full pipe already wakes it.
    private func wake() {
        state.withLock { state in
            guard !state.threadDone else { return }
            var byte: UInt8 = 1
            _ = write(wakeupSender, &byte, 1)
        }
    }

    private func serve() {
        var framer = LineFramer(maximumLineBytes: Int.max)
        var pending: [UInt8] = []
        var pendingStart = 0
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        var failure: ClientError?
        while failure == nil {
            let (outbox, ended) = state.withLock { state in
                defer { state.outbox = [] }
                return (state.outbox, state.ended)
            }
            if ended != nil { break }
            if !outbox.isEmpty {
                if pendingStart == pending.count {
                    pending = outbox
                    pendingStart = 0
                } else {
                    pending += outbox
                }
            }
            var fds = [
                pollfd(
                    fd: socket, events: Int16(POLLIN) | (pendingStart < pending.count ? Int16(POLLOUT) : 0), revents: 0),
                pollfd(fd: wakeup, events: Int16(POLLIN), revents: 0),
            ]
            guard poll(&fds, 2, -1) >= 0 || errno == EINTR else {
                failure = .disconnected("poll: \(String(cString: strerror(errno)))")
                break
            }
            if fds[1].revents != 0 {
                var drain = [UInt8](repeating: 0, count: 64)
                _ = read(wakeup, &drain, drain.count)
            }
            if fds[0].revents & Int16(POLLOUT) != 0 {
                failure = sendPending(pending, from: &pendingStart)
            }
            guard failure == nil, fds[0].revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 else { continue }
            failure = receive(into: &buffer, framer: &framer)
        }
        finish(failure)
    }

    /// Sends what the socket takes now of `pending` from `start`, and moves `start` past it;
    /// the failure that ends the connection, if the write failed.
    private func sendPending(_ pending: [UInt8], from start: inout Int) -> ClientError? {
        let written = pending[start...].withUnsafeBytes {
            send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
        }
        if written > 0 {
            start += written
        } else if written < 0 && errno != EAGAIN && errno != EINTR {
            return .disconnected("write: \(String(cString: strerror(errno)))")
        }
        return nil
    }

    /// Reads what the daemon sent and dispatches each complete line; the failure that ends
    /// the connection (the daemon closed it, a read failed, a line was not understood).
    private func receive(into buffer: inout [UInt8], framer: inout LineFramer) -> ClientError? {
        let count = buffer.withUnsafeMutableBytes { read(socket, $0.baseAddress, $0.count) }
        if count == 0 { return .disconnected("the daemon closed the connection") }
        if count < 0 {
            return errno == EAGAIN || errno == EINTR ? nil : .disconnected("read: \(String(cString: strerror(errno)))")
        }
        var failure: ClientError?
        buffer.withUnsafeBytes { bytes in
            framer.feed(UnsafeRawBufferPointer(rebasing: bytes[0..<count])) { piece in
                guard failure == nil, case .line(let line) = piece else { return }
                failure = dispatch(line)
            }
        }
        return failure
    }

    /// One line from the daemon: an event goes to `events`, a response to the oldest waiter.
    private func dispatch(_ line: UnsafeBufferPointer<UInt8>) -> ClientError? {
        let value: JSONValue
        do {
            value = try JSONParser.parse(line)
        } catch {
            return .protocolViolation("not JSON: \(String(decoding: line.prefix(200), as: UTF8.self))")
        }
        if value["event"] != nil {
            events.yield(value)
            return nil
        }
        guard value["ok"] != nil else {
            return .protocolViolation("neither an event nor a response: \(value.canonicalText.prefix(200))")
        }
        let completed: Waiter? = state.withLock { state in
            guard state.firstWaiter < state.waiters.count else { return nil }
            state.waiters[state.firstWaiter].received.append(value)
            let waiter = state.waiters[state.firstWaiter]
            guard waiter.received.count == waiter.expected else { return nil }
            state.firstWaiter += 1
            if state.firstWaiter == state.waiters.count {
                state.waiters.removeAll(keepingCapacity: true)
                state.firstWaiter = 0
            }
            return waiter
        }
        if let completed { completed.continuation.resume(returning: .success(completed.received)) }
        return nil
    }

    private func finish(_ failure: ClientError?) {
        let (reason, unanswered) = state.withLock { state in
            let reason = state.ended ?? failure ?? .disconnected("the connection ended")
            state.ended = reason
            state.threadDone = true
            defer { state.waiters = [] }
            return (reason, Array(state.waiters[state.firstWaiter...]))
        }
        Glibc.close(socket)
        Glibc.close(wakeup)
        Glibc.close(wakeupSender)
        events.finish()
        for waiter in unanswered { waiter.continuation.resume(returning: .failure(reason)) }
    }
}

import DiffcastWire

/// How the front end answers one HTTP request.
public enum HTTPRoute: Equatable, Sendable {
    /// Protocol request lines, run as on the socket; their answers make the response: one line
    /// gives its answer with a status that fits its error code, a batch (`POST /v1/requests`)
    /// every answer, one per line, with 200.
    case requests([[UInt8]], batch: Bool)
    /// A `text/event-stream` of the subscription this request line makes, its events in `form`.
    case eventStream(subscribe: [UInt8], form: EventForm)
    /// The WebSocket handshake is accepted: 101 with this `Sec-WebSocket-Accept`; then every
    /// text message is one protocol line, both ways, and events go out in `form`.
    case webSocket(accept: String, form: EventForm)
    /// A response the router made itself (a page, a script, a refusal).
    case respond(HTTPResponse)
    /// The daemon's Prometheus exposition, which the server writes (`--metrics`).
    case metrics
}

/// How an event stream or a WebSocket sends its events: as the socket does, or with changesets
/// in their compact form (`CompactEvents`), which a page asks for with `?compact=1`.
public enum EventForm: Sendable, Equatable {
    case full
    case compact

    /// The form a request's `compact` query parameter asks for: `1` or `true` compact, `0`,
    /// `false` or none full; nil for any other value.
    static func from(_ query: [String: String]) -> EventForm? {
        switch query["compact"] {
        case nil, "0", "false": .full
        case "1", "true": .compact
        default: nil
        }
    }
}

/// Maps HTTP requests to the protocol (`/v1/...`), the inspector page and the JavaScript
/// client, and says which origins may call from other pages (CORS; the WebSocket `Origin`).
/// The server's request checks apply those origins and judge the token a request presents
/// (`presentedToken`), as on every transport. It holds no state.
public struct HTTPRouter: Sendable {
    /// Origins that pages may call from (`*`: any); the daemon's own pages always may.
    public var allowedOrigins: [String]

    public init(allowedOrigins: [String]) {
        self.allowedOrigins = allowedOrigins
    }

    /// The token a request presents: `Authorization: Bearer TOKEN`, else `?token=TOKEN` (where a
    /// browser cannot set headers: EventSource, WebSocket); nil when it presents none.
    public static func presentedToken(_ request: HTTPRequest) -> String? {
        if let value = request.header("authorization") {
            let scheme = value.prefix(7)
            if scheme.lowercased() == "bearer " { return String(value.dropFirst(7)) }
        }
        return request.query["token"]
    }

    /// The `Access-Control-Allow-Origin` value for a request: its origin when allowed.
    public func corsOrigin(for request: HTTPRequest) -> String? {
        guard let origin = request.header("origin"), !isSameOrigin(request) else { return nil }
        if allowedOrigins.contains("*") { return "*" }
        return allowedOrigins.contains(origin) ? origin : nil
    }

    /// The routes of the metrics listener (`--metrics`): `GET /metrics` and nothing else, without
    /// a token, as Prometheus scrapes it.
    public static func metricsRoute(_ request: HTTPRequest) -> HTTPRoute {
        guard request.path == "/metrics" else {
            return .respond(
                HTTPResponse(
                    status: 404, contentType: "text/plain; charset=utf-8", body: Array("try GET /metrics\n".utf8)))
        }
        guard request.method == "GET" else { return Self.methodNotAllowed("GET") }
        return .metrics
    }

    /// Why a page of another origin may not call, or nil when the request may: its `Origin` is
    /// not among `allowedOrigins`. A request without `Origin` (not from a page) or from the
    /// daemon's own origin always may. The server runs it first of its checks (`HTTPCheck`).
    public func originRefusal(_ request: HTTPRequest) -> String? {
        guard let origin = request.header("origin"), !isSameOrigin(request), corsOrigin(for: request) == nil else {
            return nil
        }
        return "origin '\(origin)' is not allowed (http_origins lists the allowed)"
    }

    /// Where a request goes. Whether it may go there is the server's checks' to say
    /// (`originRefusal`, the token it presents, the rights of its lines).
    public func route(_ request: HTTPRequest) -> HTTPRoute {
        if request.method == "OPTIONS" { return Self.preflight }
        if let page = Self.page(request) { return page }
        let path = request.path
        guard path.hasPrefix("/v1/") else { return .respond(.error(404, code: "not_found", "no such page: \(path)")) }
        if let unknown = request.query.keys.sorted().first(where: { !Self.queryParameters.contains($0) }) {
            return .respond(
                .error(
                    400, code: "invalid_argument",
                    "unknown query parameter '\(unknown)' (known: \(Self.queryParameters.sorted().joined(separator: ", ")))"
                ))
        }
        let segments = path.dropFirst(4).split(separator: "/", omittingEmptySubsequences: false)
        switch (request.method, segments.count, segments.first) {
        case ("GET", 1, "collections"):
            return .requests([Array(#"{"op":"list"}"#.utf8)], batch: false)
        case (_, 2, "collections"), (_, 3, "collections"):
            if let route = collectionRoute(request, segments) { return route }
        case ("POST", 1, "requests"):
            let lines = request.body.split(separator: UInt8(ascii: "\n")).map(Array.init).filter {
                !$0.allSatisfy { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\r") || $0 == UInt8(ascii: "\t") }
            }
            guard !lines.isEmpty else { return .respond(.error(400, code: "parse_error", "no request lines")) }
            return .requests(lines, batch: true)
        case ("GET", 1, "ws"):
            guard let form = EventForm.from(request.query) else { return Self.badCompactValue }
            return webSocket(request, form: form)
        case (_, 1, "collections"), (_, 1, "requests"), (_, 1, "ws"):
            return Self.methodNotAllowed(segments.first == "requests" ? "POST" : "GET")
        default:
            break
        }
        return .respond(.error(404, code: "not_found", "no such endpoint: \(request.method) \(path)"))
    }

    /// The answer to a CORS preflight: what a page may send.
    static var preflight: HTTPRoute {
        .respond(
            HTTPResponse(
                status: 204, body: [],
                headers: [
                    "Access-Control-Allow-Methods: GET, POST, OPTIONS",
                    "Access-Control-Allow-Headers: Authorization, Content-Type, Last-Event-ID",
                    "Access-Control-Max-Age: 600",
                ]))
    }

    /// The inspector page and the JavaScript client, or nil for any other request.
    private static func page(_ request: HTTPRequest) -> HTTPRoute? {
        let asset: (contentType: String, body: [UInt8])
        switch (request.method, request.path) {
        case ("GET", "/"), ("GET", "/index.html"), ("HEAD", "/"), ("HEAD", "/index.html"):
            asset = ("text/html; charset=utf-8", WebAssets.page)
        case ("GET", "/v1/diffcast.js"), ("HEAD", "/v1/diffcast.js"):
            asset = ("text/javascript; charset=utf-8", WebAssets.script)
        default:
            return nil
        }
        return .respond(
            HTTPResponse(
                status: 200, contentType: asset.contentType, body: asset.body, omitsBody: request.method == "HEAD"))
    }

    /// `/v1/collections/NAME` (GET, POST) and `/v1/collections/NAME/events`; nil for a path
    /// below a collection that names nothing.
    private func collectionRoute(_ request: HTTPRequest, _ segments: [Substring]) -> HTTPRoute? {
        guard !segments[1].isEmpty else {
            return .respond(.error(400, code: "invalid_name", "the collection name is empty: /v1/collections/NAME"))
        }
        guard let name = PercentDecoding.decode(segments[1]) else {
            return .respond(.error(400, code: "invalid_name", "the collection name is not percent-encoded UTF-8"))
        }
        if segments.count == 3 {
            guard segments[2] == "events" else { return nil }
            guard request.method == "GET" else { return Self.methodNotAllowed("GET") }
            guard let form = EventForm.from(request.query) else { return Self.badCompactValue }
            return eventStream(of: name, request, form: form)
        }
        switch request.method {
        case "GET":
            let window = Self.window(from: request.query)
            guard !window.isEmpty else { return .requests([line(op: "get", collection: name)], batch: false) }
            var output = JSONOutput()
            output.append(
                .object([.init("op", "get"), .init("collection", .string(name)), .init("window", .object(window))]))
            return .requests([output.bytes], batch: false)
        case "POST": return post(request.body, to: name)
        default: return Self.methodNotAllowed("GET, POST")
        }
    }

    // MARK: - Routes

    /// One request as the body, its collection from the path.
    private func post(_ body: [UInt8], to name: String) -> HTTPRoute {
        let parsed: JSONValue
        do {
            parsed = try JSONParser.parse(body, maximumDepth: 256)
        } catch {
            return .respond(
                .error(
                    400, code: "parse_error",
                    "the body must be one request as a JSON object (\(error.message)); inline lines such as "
                        + "'append_items feed {\"items\":[\"a\"]}' go to POST /v1/requests"))
        }
        guard case .object(var members) = parsed else {
            return .respond(
                .error(
                    400, code: "parse_error",
                    "the body must be one request as a JSON object; inline lines go to POST /v1/requests"))
        }
        if let given = members.first(where: { $0.key == "collection" }) {
            guard given.value == .string(name) else {
                return .respond(
                    .error(400, code: "invalid_argument", "the body names another collection than the path"))
            }
        } else {
            members.append(.init("collection", .string(name)))
        }
        var output = JSONOutput()
        output.append(.object(members))
        return .requests([output.bytes], batch: false)
    }

    /// `subscribe`, resuming from `Last-Event-ID` (which EventSource sends by itself when it
    /// reconnects) or from `since`/`epoch` in the query; with `first`, `last` or `anchor` (and
    /// `before`, `after`) in the query, a windowed subscription, which starts anew with a
    /// snapshot of its view when the stream reconnects.
    private func eventStream(of name: String, _ request: HTTPRequest, form: EventForm) -> HTTPRoute {
        let query = request.query
        var members: [JSONValue.Member] = [.init("op", "subscribe"), .init("collection", .string(name))]
        let window = Self.window(from: query)
        if !window.isEmpty {
            members.append(.init("window", .object(window)))
        } else if let id = request.header("last-event-id") ?? query["last_event_id"],
            let point = ServerSentEvents.resumePoint(id)
        {
            members += [.init("since", .number(String(point.version))), .init("epoch", .string(point.epoch))]
        } else if let since = query["since"].flatMap(UInt64.init) {
            members.append(.init("since", .number(String(since))))
            if let epoch = query["epoch"] { members.append(.init("epoch", .string(epoch))) }
        }
        var output = JSONOutput()
        output.append(.object(members))
        return .eventStream(subscribe: output.bytes, form: form)
    }

    /// A window from the query (`first`, `last`, `anchor`, `before`, `after`) as the members of
    /// a request's `window`. Counts go as numbers when they are written as one, so the daemon
    /// checks them as any window's; an anchor is an identifier, given as its text.
    private static func window(from query: [String: String]) -> [JSONValue.Member] {
        ["first", "last", "anchor", "before", "after"].compactMap { key -> JSONValue.Member? in
            guard let value = query[key] else { return nil }
            let isCount =
                key != "anchor" && !value.isEmpty && value.utf8.count <= 18
                && value.utf8.allSatisfy { (0x30...0x39).contains($0) }
            return .init(key, isCount ? .number(value) : .string(value))
        }
    }

    private func webSocket(_ request: HTTPRequest, form: EventForm) -> HTTPRoute {
        guard request.isUpgrade, request.header("upgrade")?.lowercased() == "websocket" else {
            return .respond(.error(426, code: "invalid_argument", "GET /v1/ws is a WebSocket endpoint"))
        }
        guard request.header("sec-websocket-version") == "13", let key = request.header("sec-websocket-key"),
            key.utf8.count == 24
        else {
            return .respond(.error(400, code: "invalid_argument", "a WebSocket version 13 handshake is expected"))
        }
        return .webSocket(accept: WebSocketCodec.acceptValue(forKey: key), form: form)
    }

    // MARK: - Access

    private func isSameOrigin(_ request: HTTPRequest) -> Bool {
        guard let origin = request.header("origin"), let host = request.header("host") else { return false }
        return origin == "http://\(host)" || origin == "https://\(host)"
    }

    /// The query parameters any `/v1/` route takes: the token, a window, a resume point, the
    /// form of events.
    static let queryParameters: Set<String> = [
        "token", "first", "last", "anchor", "before", "after", "since", "epoch", "last_event_id", "compact",
    ]

    private static let badCompactValue = HTTPRoute.respond(
        .error(400, code: "invalid_argument", "compact is 1 (changesets in their compact form) or 0"))

    private static func methodNotAllowed(_ allowed: String) -> HTTPRoute {
        .respond(.error(405, code: "invalid_argument", "method not allowed here", headers: ["Allow: \(allowed)"]))
    }

    private func line(op: String, collection: String) -> [UInt8] {
        var output = JSONOutput()
        output.append(.object([.init("op", .string(op)), .init("collection", .string(collection))]))
        return output.bytes
    }

    /// Compares a presented token with the expected one in time that does not depend on where
    /// they differ (the socket's `auth` uses it too).
    public static func constantTimeEqual(_ given: String, _ expected: String) -> Bool {
        let left = Array(given.utf8)
        let right = Array(expected.utf8)
        var difference = UInt8(truncatingIfNeeded: left.count ^ right.count)
        for index in 0..<max(left.count, right.count) {
            difference |= (index < left.count ? left[index] : 0) ^ (index < right.count ? right[index] : 0)
        }
        return difference == 0 && left.count == right.count
    }
}

import DiffcastAccess
import DiffcastCore
import DiffcastEngine
import DiffcastHTTP
import DiffcastWire

// The checks a request passes before it runs: one chain, in one order, for every transport
// (SPEC.md "Access", "Scoped access"). The first check that refuses answers the request, its
// denial is logged and counted, and nothing of the request runs.
//
//   1. `HTTPCheck.origin`      an HTTP request from a page of another origin: 403 unless
//                              `http_origins` allows that origin.
//   2. `HTTPCheck.credential`  an HTTP request that runs protocol lines: the token it presents
//                              becomes the connection's credential, or 401 (429 past the
//                              per-holder limit).
//   3. `LineCheck.rights`      every protocol line, whatever carried it (a socket, a WebSocket
//                              message, an HTTP route or body, an event stream's `subscribe`):
//                              the holder may make it (`Holder.refusal`), or `unauthorized`.
//   4. `LineCheck.transport`   the transport can carry what the line asks for: a plain HTTP
//                              response has nowhere to put events.
//
// A socket line starts at 3, an HTTP request at 1; the metrics listener's requests pass none
// (Prometheus scrapes `/metrics` without a token). `auth` and `ping` pass 3 always, so a
// holder without rights can still present a token.

/// A check of one protocol line. A pure decision on the request, who holds the connection and
/// whether its transport can carry events, so every transport decides alike and the chain is
/// tested as a table (`RequestCheckTests`).
enum LineCheck: CaseIterable, Sendable {
    /// The holder may make the request: `Holder.refusal`, the one place rights are decided.
    case rights
    /// The transport can carry the answer: `subscribe` needs a transport that carries events.
    case transport

    /// The first refusal of the chain, or nil when the line may run.
    static func refusal(of request: Request, by holder: Holder, carriesEvents: Bool) -> LineRefusal? {
        for check in allCases {
            if let refusal = check.refusal(of: request, by: holder, carriesEvents: carriesEvents) { return refusal }
        }
        return nil
    }

    func refusal(of request: Request, by holder: Holder, carriesEvents: Bool) -> LineRefusal? {
        switch self {
        case .rights:
            return holder.refusal(of: request.command, op: request.op).map(LineRefusal.unauthorized)
        case .transport:
            guard !carriesEvents, case .subscribe = request.command else { return nil }
            return .unsupported(
                .invalidArgument(
                    "subscribe over HTTP with GET /v1/collections/NAME/events (Server-Sent Events) or /v1/ws (WebSocket)"
                ))
        }
    }
}

/// Why a protocol line does not run.
enum LineRefusal: Equatable, Sendable {
    /// The holder lacks the right: answered `unauthorized`, a denial logged and counted.
    case unauthorized(Refusal)
    /// The transport cannot carry it: answered with the error.
    case unsupported(DiffcastError)
}

/// A check of one HTTP request of the protocol listener, before the protocol lines its route
/// makes are run.
enum HTTPCheck: CaseIterable, Sendable {
    /// A page of another origin calls only when `http_origins` allows it (also a WebSocket's
    /// `Origin`): `HTTPRouter.originRefusal`.
    case origin
    /// The token the request presents holds: `Server.presentCredential`. Only for routes that
    /// run protocol lines; the inspector page and its script need no token.
    case credential
}

extension Server {
    /// Runs the line checks on a parsed request: `true` when one refused it, and the refusal is
    /// then its answer, in its slot; `false` leaves the slot to the request, which may run.
    func refuses(_ request: Request, slot: UInt64, on connection: Connection) -> Bool {
        let refusal = LineCheck.refusal(
            of: request, by: connection.holder, carriesEvents: connection.transport.carriesEvents)
        switch refusal {
        case nil:
            return false
        case .unauthorized(let refusal):
            deny(request, refusal, slot: slot, on: connection)
        case .unsupported(let error):
            reject(error, id: request.id, op: request.op, slot: slot, on: connection)
        }
        return true
    }

    /// Runs the HTTP checks on a request of the protocol listener: the response that refuses
    /// it, or nil when its route may run.
    func httpRefusal(
        of request: HTTPRequest, routedTo route: HTTPRoute, by router: HTTPRouter, on connection: Connection
    ) -> HTTPResponse? {
        for check in HTTPCheck.allCases {
            switch check {
            case .origin:
                guard let message = router.originRefusal(request) else { continue }
                logDenial(op: "http", collection: nil, reason: message, on: connection)
                return .error(403, code: "unauthorized", message)
            case .credential:
                switch route {
                case .requests, .eventStream, .webSocket:
                    connection.forwardedFor = forwardedClient(of: request.header("x-forwarded-for"), on: connection)
                    if let refusal = presentCredential(of: request, on: connection) { return refusal }
                case .respond, .metrics:
                    continue
                }
            }
        }
        return nil
    }

    /// Takes the credential an HTTP request presents for the connection (verified once: a
    /// keep-alive connection that presents the same token again keeps it), or the 401 (429
    /// past the per-holder limit) that refuses it.
    func presentCredential(of request: HTTPRequest, on connection: Connection) -> HTTPResponse? {
        guard let token = HTTPRouter.presentedToken(request) else {
            let credential: Credential = listenersRequireCredentials ? .anonymous : .everything
            _ = setCredential(credential, on: connection, reason: "a request presented no token")
            return nil
        }
        if case .token(let held) = connection.holder.credential, held.text == token { return nil }
        let failure: AuthRefusal
        switch credential(presenting: token, on: connection) {
        case .success(let credential):
            guard let refusal = setCredential(credential, on: connection, reason: "another token was presented")
            else { return nil }
            failure = refusal
        case .failure(let refusal):
            failure = refusal
        }
        logDenial(op: "auth", collection: nil, reason: failure.message, on: connection)
        if failure.isLimit { return .error(429, code: "limit_exceeded", failure.message) }
        return .error(
            401, code: "unauthorized", failure.message, headers: [#"WWW-Authenticate: Bearer error="invalid_token""#])
    }
}

extension Transport {
    /// Whether the transport carries events: every one but a plain HTTP response.
    var carriesEvents: Bool {
        if case .http = self { return false }
        return true
    }
}

import CLibUV
import DiffcastAccess
import DiffcastCore
import DiffcastEngine
import DiffcastHTTP
import DiffcastWire
import Glibc
import Logging

/// Who may do what (SPEC.md "Access", "Scoped access"): the credential a connection starts
/// with, `auth`, the decision each request passes, subscriptions ended when rights end
/// (expiry, a narrowing refresh, a key removed at a reload), the per-holder limit, and the log
/// of every denial. The decision itself is `Holder`'s, the same for every transport.
extension Server {
    // MARK: - Credentials

    /// Whether a TCP or HTTP client must present something to get more than the anonymous
    /// rights: a token or a key set is configured. Without either the listener is loopback-only
    /// (the settings refuse anything else) and gives every right.
    var listenersRequireCredentials: Bool {
        configuration.tcpToken != nil || configuration.tokenVerifier != nil
    }

    /// What a connection may do before it presents anything. A Unix peer's groups come from
    /// `lookups`, when an access list names groups.
    func initialCredential(of connection: Connection, lookups: inout PeerGroupLookups) -> Credential {
        guard connection.isTCP else {
            return .peer(
                PeerAccess(
                    mayWrite: configuration.publishers.allows(connection.peer, groups: { lookups.groups(of: $0) }),
                    mayRead: configuration.subscribers.allows(connection.peer, groups: { lookups.groups(of: $0) }),
                    userID: connection.peer?.userID))
        }
        return listenersRequireCredentials ? .anonymous : .everything
    }

    /// `IP:PORT` of a TCP peer, `uid N` of a Unix-socket one.
    func peerAddress(of connection: Connection) -> String {
        guard connection.isTCP else { return connection.peer.map { "uid \($0.userID)" } ?? "unix" }
        return SocketAddress(peerOf: LoopHandles.tcp(connection.handle))?.hostAndPort ?? "tcp"
    }

    /// The address whose refused tokens are counted together: the peer's IP without its port.
    func throttleKey(of connection: Connection) -> String {
        connection.forwardedFor ?? peerHost(of: connection)
    }

    /// The peer's address without its port (a TCP peer's IP; a Unix peer's `uid N` as it is).
    private func peerHost(of connection: Connection) -> String {
        guard connection.isTCP, let colon = connection.peerAddress.lastIndex(of: ":") else {
            return connection.peerAddress
        }
        return String(connection.peerAddress[..<colon])
    }

    /// How logs name the peer: the client a trusted proxy forwarded, and the proxy.
    func peerName(of connection: Connection) -> String {
        guard let client = connection.forwardedFor else { return connection.peerAddress }
        return "\(client) via \(connection.peerAddress)"
    }

    /// The client a request comes from when its peer is a trusted proxy: the last address of its
    /// `X-Forwarded-For` (the one the proxy itself saw; earlier ones are the client's word).
    func forwardedClient(of forwardedFor: String?, on connection: Connection) -> String? {
        guard let forwardedFor, !configuration.trustedProxies.isEmpty,
            configuration.trustedProxies.contains(peerHost(of: connection))
        else { return nil }
        let last = forwardedFor.split(separator: ",").last.map { $0.trimmingWhitespace() } ?? ""
        return last.isEmpty || last.utf8.count > 64 ? nil : last
    }

    /// How logs name a connection's transport.
    func transportName(of connection: Connection) -> String {
        switch connection.transport {
        case .lines: connection.isTCP ? "tcp" : "unix"
        case .http: "http"
        case .eventStream: "sse"
        case .webSocket: "websocket"
        }
    }

    static func wallClock() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }

    // MARK: - Deciding

    /// Answers a request its holder may not make `unauthorized`, logging and counting the denial.
    func deny(_ request: Request, _ refusal: Refusal, slot: UInt64, on connection: Connection) {
        logDenial(op: request.op, collection: refusal.collection, reason: refusal.message, on: connection)
        connection.answer(
            slot: slot,
            SharedBytes(
                WireEncoder.failure(id: request.id, op: request.op, error: .unauthorized(refusal.message))))
    }

    func logDenial(op: String, collection: String?, reason: String, on connection: Connection) {
        counters.denials += 1
        logger.notice(
            "denied",
            metadata: [
                "holder": "\(connection.holder.name)", "transport": "\(transportName(of: connection))",
                "peer": "\(peerName(of: connection))", "op": "\(op)", "collection": "\(collection ?? "-")",
                "reason": "\(reason)",
            ])
    }

    /// A `drop` that is allowed is logged with who asked for it.
    func logDrop(_ name: String, on connection: Connection) {
        logger.notice(
            "drop",
            metadata: [
                "holder": "\(connection.holder.name)", "transport": "\(transportName(of: connection))",
                "peer": "\(peerName(of: connection))", "collection": "\(name)",
            ])
    }

    /// Narrows a permitted request to its holder's rights: `list` to what it may read, and a
    /// `subscribe` that may not create its collection.
    func scoped(_ request: Request, for holder: Holder) -> Request {
        var request = request
        switch request.command {
        case .list:
            if let readable = holder.readable { request.command = .list(readable: readable) }
        case .subscribe(let name, let since, let epoch, let window, _):
            if !holder.mayCreate(name) {
                request.command = .subscribe(
                    collection: name, since: since, epoch: epoch, window: window, createsMissing: false)
            }
        default:
            break
        }
        return request
    }

    // MARK: - Presenting a token

    /// Why a presented token gives no rights, or the credential it gives. The daemon's own
    /// token is compared in constant time; a capability token is verified by the key set; an
    /// address with too many refused tokens is refused without verifying.
    func credential(presenting token: String, on connection: Connection) -> Result<Credential, AuthRefusal> {
        let now = Self.wallClock()
        let address = throttleKey(of: connection)
        if let seconds = authThrottle.blockedFor(address, now: now) {
            return .failure(
                AuthRefusal(
                    message: "too many refused tokens from \(address): try again in \(Int(seconds.rounded(.up))) s",
                    isLimit: false))
        }
        if let expected = configuration.tcpToken, HTTPRouter.constantTimeEqual(token, expected) {
            return .success(.everything)
        }
        let refusal: String
        if let verifier = configuration.tokenVerifier {
            do {
                return .success(.token(try verifier.verify(token, now: now)))
            } catch {
                refusal = "token refused: \(error.description)"
            }
        } else {
            refusal = "wrong token"
        }
        counters.authFailures += 1
        if authThrottle.recordFailure(address, now: now) {
            logger.warning(
                "refused tokens from one address: refusing its tokens unverified for a while",
                metadata: ["peer": "\(address)", "seconds": "\(authThrottle.blockSeconds)"])
        }
        return .failure(AuthRefusal(message: refusal, isLimit: false))
    }

    /// Gives a connection a new credential: the per-holder count follows it, and subscriptions
    /// its new rights do not cover end with `revoked`. Refused (the credential stays) when the
    /// token's holder already has `max_connections_per_subject` connections.
    func setCredential(_ credential: Credential, on connection: Connection, reason: String) -> AuthRefusal? {
        let old = connection.holder.subject
        let new: String? = if case .token(let token) = credential { token.subject } else { nil }
        if let new, new != old {
            let held = connectionsPerSubject[new, default: 0]
            let limit = configuration.maximumConnectionsPerSubject
            guard held < limit else {
                return AuthRefusal(
                    message: "max_connections_per_subject (\(limit)) connections hold tokens for '\(new)'",
                    isLimit: true)
            }
            connectionsPerSubject[new] = held + 1
        }
        if let old, old != new { releaseSubject(old) }
        connection.holder.credential = credential
        if case .token = credential { tokenHolders.insert(connection.id) } else { tokenHolders.remove(connection.id) }
        endUncoveredSubscriptions(of: connection, because: reason)
        return nil
    }

    func releaseSubject(_ subject: String) {
        let remaining = connectionsPerSubject[subject, default: 1] - 1
        connectionsPerSubject[subject] = remaining > 0 ? remaining : nil
    }

    /// `auth` on a line transport: the token replaces the connection's rights; a refused one
    /// leaves them, and the third refusal closes the connection.
    func authenticate(_ token: String, _ request: Request, slot: UInt64, on connection: Connection) {
        let failure: AuthRefusal
        switch credential(presenting: token, on: connection) {
        case .success(let credential):
            let reason = "the token for '\(connection.holder.name)' was replaced"
            if let refusal = setCredential(credential, on: connection, reason: reason) {
                failure = refusal
            } else {
                connection.answer(slot: slot, SharedBytes(WireEncoder.success(id: request.id, op: request.op)))
                return
            }
        case .failure(let refusal):
            failure = refusal
        }
        let error: DiffcastError = failure.isLimit ? .limitExceeded(failure.message) : .unauthorized(failure.message)
        logDenial(op: "auth", collection: nil, reason: failure.message, on: connection)
        connection.answer(slot: slot, SharedBytes(WireEncoder.failure(id: request.id, op: request.op, error: error)))
        guard !failure.isLimit else { return }
        connection.failedAuthentications += 1
        if connection.failedAuthentications >= Self.authenticationAttempts {
            stopReading(connection)
        }
    }

    // MARK: - Rights that end

    /// Ends with `revoked` every subscription of the connection that its rights no longer
    /// cover; an event stream then ends too (its client reconnects with a fresh token).
    func endUncoveredSubscriptions(of connection: Connection, because reason: String) {
        var ended = false
        for name in connection.subscriptions.names.sorted() where !connection.holder.may(.read, name) {
            let message = "\(reason): '\(name)' may no longer be read (auth again, then subscribe with since and epoch)"
            logDenial(op: "subscription", collection: name, reason: message, on: connection)
            fanOut.revoke(connection, from: name, message: message)
            ended = true
        }
        if ended, case .eventStream = connection.transport { connection.finish() }
    }

    /// Once a second: tokens past their `exp` (and leeway) give way to the anonymous rights.
    func expireTokens() {
        let now = Self.wallClock()
        authThrottle.forgetQuiet(now: now)
        let leeway = configuration.tokenVerifier?.leewaySeconds ?? 0
        var expired = false
        for id in tokenHolders {
            guard let connection = connections[id], case .token(let token) = connection.holder.credential,
                now > token.expiresAt + leeway
            else { continue }
            _ = setCredential(.anonymous, on: connection, reason: "the token for \(token.holderName) expired")
            expired = true
        }
        if expired { flushMarked() }
    }

    /// After a reload: every token is verified again (its key may be gone, the audience may have
    /// changed), the access lists and anonymous rights apply anew.
    func reviewCredentialsAfterReload() {
        let now = Self.wallClock()
        var lookups = PeerGroupLookups()
        for connection in connections.values {
            connection.holder.anonymous = configuration.anonymousRights
            switch connection.holder.credential {
            case .peer:
                connection.holder.credential = initialCredential(of: connection, lookups: &lookups)
                endUncoveredSubscriptions(of: connection, because: "the access lists changed")
            case .token(let token):
                guard let verifier = configuration.tokenVerifier else {
                    _ = setCredential(.anonymous, on: connection, reason: "auth_keys was removed")
                    continue
                }
                do {
                    _ = setCredential(
                        .token(try verifier.verify(token.text, now: now)), on: connection,
                        reason: "the token for \(token.holderName) changed")
                } catch {
                    _ = setCredential(
                        .anonymous, on: connection,
                        reason: "the token for \(token.holderName) no longer holds (\(error.description))")
                }
            case .everything:
                // The daemon's token, once presented, holds for the connection's life.
                break
            case .anonymous:
                endUncoveredSubscriptions(of: connection, because: "the anonymous rights changed")
            }
        }
        flushMarked()
    }
}

/// Why a presented token gave no rights: refused (`unauthorized`), or over the per-holder limit
/// (`limit_exceeded`).
struct AuthRefusal: Error {
    let message: String
    let isLimit: Bool
}

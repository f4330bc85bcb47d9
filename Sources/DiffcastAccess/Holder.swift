import DiffcastWire

/// What a connection (or one HTTP request) presented, as far as rights go.
public enum Credential: Sendable, Equatable {
    /// Nothing, or a token that expired: the anonymous rights alone.
    case anonymous
    /// The daemon's static token (`tcp_token`), or a loopback listener that asks for none
    /// because no token or key is configured: every right.
    case everything
    /// A Unix-socket peer that has not sent `auth`, judged by its credentials and the
    /// `publishers`/`subscribers` lists.
    case peer(PeerAccess)
    /// A capability token that held when it was presented.
    case token(VerifiedToken)
}

/// What the access lists let a Unix-socket peer do.
public struct PeerAccess: Sendable, Equatable {
    /// Writes and `drop` (the publishers list).
    public var mayWrite: Bool
    /// `get`, `subscribe`, `window`, `list`, `stats` (the subscribers list).
    public var mayRead: Bool
    /// The peer's user id, for messages and logs.
    public var userID: UInt32?

    public init(mayWrite: Bool, mayRead: Bool, userID: UInt32?) {
        self.mayWrite = mayWrite
        self.mayRead = mayRead
        self.userID = userID
    }
}

/// The right a request needs (SPEC.md "Scoped access").
public enum Right: String, Sendable {
    case read, write, drop, admin
}

/// A request a holder may not make: the right it lacks and the message its `unauthorized`
/// answer carries.
public struct Refusal: Sendable, Equatable {
    public let right: Right
    public let collection: String?
    public let message: String
}

/// A credential with the anonymous rights that join it: the one place that decides whether a
/// request is allowed. Every transport asks it, so they decide alike.
///
/// Its parts live in one immutable box, made when the credential or the anonymous rights
/// change: every request of a connection is checked against its holder, so a copy is one
/// retain (not one per pattern list), and a token's rights are joined to the anonymous ones
/// once, not on every request.
public struct Holder: Sendable, Equatable {
    public var credential: Credential {
        get { parts.credential }
        set { parts = Parts(newValue, anonymous: anonymous) }
    }
    /// `auth_anonymous`: given to everyone, joined to a token's rights.
    public var anonymous: Rights {
        get { parts.anonymous }
        set { parts = Parts(credential, anonymous: newValue) }
    }

    private final class Parts: Sendable {
        let credential: Credential
        let anonymous: Rights
        /// Rights as patterns, for credentials that have them (a token joined with the
        /// anonymous rights, anonymous alone); nil for those that are not scoped by collection
        /// (the daemon's token, a peer's lists).
        let scopedRights: Rights?

        init(_ credential: Credential, anonymous: Rights) {
            self.credential = credential
            self.anonymous = anonymous
            switch credential {
            case .anonymous: scopedRights = anonymous
            case .token(let token): scopedRights = token.rights.union(anonymous)
            case .everything, .peer: scopedRights = nil
            }
        }
    }

    private var parts: Parts

    public init(_ credential: Credential, anonymous: Rights) {
        parts = Parts(credential, anonymous: anonymous)
    }

    public static func == (lhs: Holder, rhs: Holder) -> Bool {
        lhs.parts === rhs.parts || (lhs.credential == rhs.credential && lhs.anonymous == rhs.anonymous)
    }

    /// Whether a valid token (or the daemon's) was presented: a refusal is then 403, not 401.
    public var presentedToken: Bool {
        switch credential {
        case .anonymous, .peer: false
        case .everything, .token: true
        }
    }

    /// The token's `sub`, when it names one.
    public var subject: String? {
        if case .token(let token) = credential { return token.subject }
        return nil
    }

    /// How logs and messages name the holder.
    public var name: String {
        switch credential {
        case .anonymous: "anonymous"
        case .everything: "daemon token"
        case .peer(let peer): peer.userID.map { "uid \($0)" } ?? "peer"
        case .token(let token): token.subject ?? "token without sub"
        }
    }

    /// Whether the holder has `right` on the collection.
    public func may(_ right: Right, _ collection: String) -> Bool {
        switch parts.credential {
        case .everything:
            return true
        case .peer(let peer):
            switch right {
            case .read: return peer.mayRead || anonymous.admin || anonymous.read.contains(collection)
            case .write: return peer.mayWrite || anonymous.admin || anonymous.write.contains(collection)
            case .drop: return peer.mayWrite || anonymous.admin || anonymous.drop.contains(collection)
            case .admin: return peer.mayRead || anonymous.admin
            }
        case .anonymous, .token:
            guard let rights = parts.scopedRights else { return false }
            if rights.admin { return true }
            switch right {
            case .read: return rights.read.contains(collection)
            case .write: return rights.write.contains(collection)
            case .drop: return rights.drop.contains(collection)
            case .admin: return false
            }
        }
    }

    /// The collections `list` shows: nil for all of them.
    public var readable: CollectionScope? {
        if case .peer(let peer) = credential, !peer.mayRead { return anonymous.admin ? nil : anonymous.read }
        guard let rights = parts.scopedRights, !rights.admin else { return nil }
        return rights.read
    }

    /// Why the holder may not make this request, or nil when it may. `subscribe` needs `read`
    /// (it creates a missing collection only for a writer: `mayCreate`), `list` a token or some
    /// right to read, `stats` `admin`; `ping` and `auth` are always allowed.
    public func refusal(of command: Command, op: String) -> Refusal? {
        let right: Right
        switch command {
        case .ping, .auth:
            return nil
        case .get(let name, _), .subscribe(let name, _, _, _, _), .window(let name, _), .unsubscribe(let name):
            if may(.read, name) { return nil }
            right = .read
        case .write(let name, _):
            if may(.write, name) { return nil }
            right = .write
        case .drop(let name):
            if may(.drop, name) { return nil }
            right = .drop
        case .list:
            // A token's holder is shown what it may read, maybe nothing; a client that presented
            // nothing and may read nothing is refused, as on a listener that takes a token first.
            if case .token = credential { return nil }
            if let readable, readable.isEmpty { return refused(.read, nil, op: op) }
            return nil
        case .stats:
            if may(.admin, "") { return nil }
            right = .admin
        }
        return refused(right, command.collection, op: op)
    }

    /// Whether a `subscribe` may create the collection when it does not exist.
    public func mayCreate(_ collection: String) -> Bool {
        may(.write, collection)
    }

    private func refused(_ right: Right, _ collection: String?, op: String) -> Refusal {
        let what = collection.map { "\(right.rawValue) '\($0)'" } ?? (right == .admin ? "ask for stats" : "list")
        let message: String
        switch credential {
        case .token(let token):
            message =
                "token for \(token.holderName) may not \(what)"
                + (right == .admin ? " (it needs \"admin\": true)" : "")
        case .anonymous:
            message =
                "an anonymous client may not \(what): present a token first (`auth TOKEN` on a connection, "
                + "'Authorization: Bearer TOKEN' or ?token= over HTTP; the daemon's --tcp-token or a token signed "
                + "by a key of --auth-keys; the diffcast command sends --token or $DIFFCAST_TOKEN)"
        case .peer(let peer):
            message =
                "\(peer.userID.map { "uid \($0)" } ?? "this peer") may not '\(op)'"
                + (collection.map { " on '\($0)'" } ?? "") + " (see --publishers/--subscribers)"
        case .everything:
            message = "may not \(what)"
        }
        return Refusal(right: right, collection: collection, message: message)
    }
}

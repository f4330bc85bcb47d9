import DiffcastAccess
import DiffcastBackbone
import DiffcastStorage
import DiffcastWire
import Logging

/// Settings checked as a whole: every value within what its setting accepts, the rules that join
/// several keys, and the values that need parsing (log level, access lists, key set, rights,
/// the store's and the backbone's options) parsed. The executable builds its services from it.
public struct ValidatedSettings: Sendable {
    /// The values, each within what its setting accepts.
    public let settings: DaemonSettings
    public let logLevel: Logger.Level
    /// The state directory, unless a backbone keeps the state.
    public let stateDirectory: String?
    public let store: StateStore.Options
    public private(set) var backbone: BackboneOptions?
    /// Who may write, and who may read, on the Unix socket.
    public let publishers: AccessList
    public let subscribers: AccessList
    /// Verifies capability tokens; nil without `auth_keys`.
    public let tokenVerifier: TokenVerifier?
    public let anonymousRights: Rights
    /// Settings that are valid but have no effect here, for the start to log.
    public private(set) var notices: [String] = []

    public init(_ settings: DaemonSettings) throws(SettingsError) {
        try settings.checkEachValue()
        self.settings = settings
        // The choices of log_level and sync are the names of these types' cases.
        logLevel = Logger.Level(rawValue: settings.logLevel) ?? .info
        var store = StateStore.Options()
        store.sync = SyncPolicy(rawValue: settings.sync) ?? .always
        store.syncIntervalMilliseconds = settings.syncIntervalMs
        store.checkpointLogBytes = settings.checkpointLogBytes
        self.store = store
        try Self.refuseOpenListeners(settings)
        do {
            publishers = try AccessList(parsing: settings.publishers.joined(separator: ","))
            subscribers = try AccessList(parsing: settings.subscribers.joined(separator: ","))
        } catch {
            throw SettingsError("publishers/subscribers: \(error)")
        }
        tokenVerifier = try Self.tokenVerifier(settings)
        if let anonymous = settings.authAnonymous {
            do {
                anonymousRights = try Rights(claimText: anonymous)
            } catch {
                throw SettingsError("auth_anonymous: \(error) (expected e.g. {\"read\": [\"public.>\"]})")
            }
        } else {
            anonymousRights = .none
        }
        stateDirectory = settings.backbone == nil ? settings.stateDir : nil
        if let backbone = settings.backbone {
            self.backbone = try Self.backboneOptions(settings, servers: backbone)
            if let directory = settings.stateDir {
                // The packaged unit always passes --state-dir: joining a backbone must not mean
                // editing the unit. The start logs this.
                notices.append(
                    "state_dir \(directory) is not used: with a backbone the shared log (JetStream) keeps the state")
            }
        }
    }

    /// A TCP or HTTP listener other machines can reach needs tokens: without them anyone could
    /// read and write.
    private static func refuseOpenListeners(_ settings: DaemonSettings) throws(SettingsError) {
        for (key, address) in [("tcp", settings.tcp), ("http", settings.http)] {
            guard let address, settings.tcpToken == nil, settings.authKeys == nil, !isLoopback(address) else {
                continue
            }
            throw SettingsError(
                "\(key): '\(address)' is reachable from other machines and neither tcp_token nor auth_keys is set: "
                    + "anyone could read and write; set auth_keys (--auth-keys) or tcp_token (--tcp-token), or listen "
                    + "on a loopback address (127.0.0.1, [::1])")
        }
    }

    /// The key set of `auth_keys` (waiting for the file, as a reload after a deploy may need),
    /// with the audience, issuer and leeway that only mean something with it.
    private static func tokenVerifier(_ settings: DaemonSettings) throws(SettingsError) -> TokenVerifier? {
        guard let path = settings.authKeys else {
            if settings.authAudience != nil || settings.authIssuer != nil {
                throw SettingsError(
                    "auth_audience and auth_issuer need auth_keys (the key set tokens are verified with)")
            }
            return nil
        }
        do {
            return TokenVerifier(
                keys: try KeySet.loadWaiting(path: path), audience: settings.authAudience,
                issuer: settings.authIssuer, leewaySeconds: Double(settings.authLeewayS))
        } catch {
            throw SettingsError("auth_keys: \(error)")
        }
    }

    /// The NATS servers and how to reach them; the ways to log in are alternatives, and a
    /// certificate goes with its key.
    private static func backboneOptions(_ settings: DaemonSettings, servers list: String) throws(SettingsError)
        -> BackboneOptions
    {
        let servers = list.split(separator: ",").map { $0.trimmingPrefix(" ") }.map(String.init)
        guard !servers.isEmpty, servers.allSatisfy({ $0.hasPrefix("nats://") || $0.hasPrefix("tls://") }) else {
            throw SettingsError("backbone: expected nats://HOST:PORT URLs separated by commas, got '\(list)'")
        }
        let ways = [settings.backboneUser, settings.backboneToken, settings.backboneCreds].count { $0 != nil }
        guard ways <= 1 else {
            throw SettingsError("backbone_user, backbone_token and backbone_creds are alternatives: set one")
        }
        guard (settings.backboneUser == nil) == (settings.backbonePassword == nil) else {
            throw SettingsError("backbone_user and backbone_password go together")
        }
        guard (settings.backboneTlsCert == nil) == (settings.backboneTlsKey == nil) else {
            throw SettingsError("backbone_tls_cert and backbone_tls_key go together")
        }
        var credentials = NATSCredentials()
        credentials.user = settings.backboneUser
        credentials.password = settings.backbonePassword
        credentials.token = settings.backboneToken
        credentials.credentialsFile = settings.backboneCreds
        credentials.tlsCA = settings.backboneTlsCa
        credentials.tlsCertificate = settings.backboneTlsCert
        credentials.tlsKey = settings.backboneTlsKey
        return BackboneOptions(
            servers: servers, leaseMilliseconds: settings.backboneLeaseMs, mayOwn: settings.backboneOwner,
            replicas: settings.backboneReplicas, credentials: credentials)
    }

    /// Whether a `HOST:PORT` names a loopback address (127.0.0.0/8, ::1, localhost).
    static func isLoopback(_ address: String) -> Bool {
        guard let colon = address.lastIndex(of: ":") else { return false }
        let host = address[..<colon].filter { $0 != "[" && $0 != "]" }
        return host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }
}

/// How to join other daemons through NATS (`backbone` and its keys).
public struct BackboneOptions: Sendable, Equatable {
    public var servers: [String]
    public var leaseMilliseconds: Int
    public var mayOwn: Bool
    public var replicas: Int
    public var credentials: NATSCredentials
}

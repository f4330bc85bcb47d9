import DiffcastAccess
import DiffcastBackbone
import DiffcastEngine
import DiffcastServer
import DiffcastStorage
import DiffcastWire
import Logging
import Yams

/// Every setting of `diffcastd` with its default. `config/diffcastd.yaml` lists the same keys
/// with the same values and a comment each; the command line overrides the file.
public struct DaemonSettings: Codable, Equatable, Sendable {
    public var socket = "/tmp/diffcast.sock"
    public var tcp: String?
    public var tcpToken: String?
    public var metrics: String?
    public var http: String?
    public var httpOrigins: [String] = []
    public var streamLingerMs = 1
    public var streamHeartbeatMs = 15_000
    public var ioThreads = 1
    public var logLevel = "info"
    public var maxLineBytes = 16 * 1024 * 1024
    public var maxUnsentBytes = 8 * 1024 * 1024
    public var slowSubscriberPolicy = "catch_up"
    public var coalesceWindowMs = 0
    public var historyVersions = 64
    public var stateDir: String?
    public var sync = "always"
    public var syncIntervalMs = 100
    public var checkpointLogBytes = 64 * 1024 * 1024
    public var maxConnections = 10_000
    public var maxCollections = 100_000
    public var maxItemsPerCollection = 10_000_000
    public var publishers: [String] = []
    public var subscribers: [String] = []
    public var backbone: String?
    public var backboneLeaseMs = 3000
    public var backboneOwner = true
    public var backboneReplicas = 3
    public var backboneSnapshotEvery = 1000
    public var authKeys: String?
    public var authAudience: String?
    public var authIssuer: String?
    public var authLeewayS = 5
    /// The `diffcast` claim of clients that present nothing, as JSON text.
    public var authAnonymous: String?
    public var maxConnectionsPerSubject = 100
    public var trustedProxies: [String] = []
    public var backboneUser: String?
    public var backbonePassword: String?
    public var backboneToken: String?
    public var backboneCreds: String?
    public var backboneTlsCa: String?
    public var backboneTlsCert: String?
    public var backboneTlsKey: String?

    public init() {}

    enum CodingKeys: String, CodingKey, CaseIterable {
        case socket, tcp, logLevel = "log_level", tcpToken = "tcp_token", maxLineBytes = "max_line_bytes"
        case maxUnsentBytes = "max_unsent_bytes", slowSubscriberPolicy = "slow_subscriber_policy"
        case coalesceWindowMs = "coalesce_window_ms", historyVersions = "history_versions", stateDir = "state_dir"
        case sync, syncIntervalMs = "sync_interval_ms", checkpointLogBytes = "checkpoint_log_bytes"
        case maxConnections = "max_connections", maxCollections = "max_collections"
        case maxItemsPerCollection = "max_items_per_collection", publishers, subscribers, metrics, http
        case httpOrigins = "http_origins", streamLingerMs = "stream_linger_ms", ioThreads = "io_threads"
        case streamHeartbeatMs = "stream_heartbeat_ms"
        case backbone, backboneLeaseMs = "backbone_lease_ms", backboneOwner = "backbone_owner"
        case backboneReplicas = "backbone_replicas", backboneSnapshotEvery = "backbone_snapshot_every"
        case authKeys = "auth_keys", authAudience = "auth_audience", authIssuer = "auth_issuer"
        case authLeewayS = "auth_leeway_s", authAnonymous = "auth_anonymous"
        case maxConnectionsPerSubject = "max_connections_per_subject", trustedProxies = "trusted_proxies"
        case backboneUser = "backbone_user", backbonePassword = "backbone_password", backboneToken = "backbone_token"
        case backboneCreds = "backbone_creds", backboneTlsCa = "backbone_tls_ca", backboneTlsCert = "backbone_tls_cert"
        case backboneTlsKey = "backbone_tls_key"
    }

    /// Keys the file leaves out keep their defaults.
    public init(from decoder: any Decoder) throws {
        let file = try decoder.container(keyedBy: CodingKeys.self)
        let defaults = DaemonSettings()
        socket = try file.decodeIfPresent(String.self, forKey: .socket) ?? defaults.socket
        tcp = try file.decodeIfPresent(String.self, forKey: .tcp)
        tcpToken = try file.decodeIfPresent(String.self, forKey: .tcpToken)
        metrics = try file.decodeIfPresent(String.self, forKey: .metrics)
        http = try file.decodeIfPresent(String.self, forKey: .http)
        httpOrigins = try file.decodeIfPresent([String].self, forKey: .httpOrigins) ?? defaults.httpOrigins
        streamLingerMs = try file.decodeIfPresent(Int.self, forKey: .streamLingerMs) ?? defaults.streamLingerMs
        streamHeartbeatMs =
            try file.decodeIfPresent(Int.self, forKey: .streamHeartbeatMs) ?? defaults.streamHeartbeatMs
        ioThreads = try file.decodeIfPresent(Int.self, forKey: .ioThreads) ?? defaults.ioThreads
        logLevel = try file.decodeIfPresent(String.self, forKey: .logLevel) ?? defaults.logLevel
        maxLineBytes = try file.decodeIfPresent(Int.self, forKey: .maxLineBytes) ?? defaults.maxLineBytes
        maxUnsentBytes = try file.decodeIfPresent(Int.self, forKey: .maxUnsentBytes) ?? defaults.maxUnsentBytes
        slowSubscriberPolicy =
            try file.decodeIfPresent(String.self, forKey: .slowSubscriberPolicy) ?? defaults.slowSubscriberPolicy
        coalesceWindowMs = try file.decodeIfPresent(Int.self, forKey: .coalesceWindowMs) ?? defaults.coalesceWindowMs
        historyVersions = try file.decodeIfPresent(Int.self, forKey: .historyVersions) ?? defaults.historyVersions
        stateDir = try file.decodeIfPresent(String.self, forKey: .stateDir)
        sync = try file.decodeIfPresent(String.self, forKey: .sync) ?? defaults.sync
        syncIntervalMs = try file.decodeIfPresent(Int.self, forKey: .syncIntervalMs) ?? defaults.syncIntervalMs
        checkpointLogBytes =
            try file.decodeIfPresent(Int.self, forKey: .checkpointLogBytes) ?? defaults.checkpointLogBytes
        maxConnections = try file.decodeIfPresent(Int.self, forKey: .maxConnections) ?? defaults.maxConnections
        maxCollections = try file.decodeIfPresent(Int.self, forKey: .maxCollections) ?? defaults.maxCollections
        maxItemsPerCollection =
            try file.decodeIfPresent(Int.self, forKey: .maxItemsPerCollection) ?? defaults.maxItemsPerCollection
        publishers = try file.decodeIfPresent([String].self, forKey: .publishers) ?? defaults.publishers
        subscribers = try file.decodeIfPresent([String].self, forKey: .subscribers) ?? defaults.subscribers
        backbone = try file.decodeIfPresent(String.self, forKey: .backbone)
        backboneLeaseMs = try file.decodeIfPresent(Int.self, forKey: .backboneLeaseMs) ?? defaults.backboneLeaseMs
        backboneOwner = try file.decodeIfPresent(Bool.self, forKey: .backboneOwner) ?? defaults.backboneOwner
        backboneReplicas = try file.decodeIfPresent(Int.self, forKey: .backboneReplicas) ?? defaults.backboneReplicas
        backboneSnapshotEvery =
            try file.decodeIfPresent(Int.self, forKey: .backboneSnapshotEvery) ?? defaults.backboneSnapshotEvery
        authKeys = try file.decodeIfPresent(String.self, forKey: .authKeys)
        authAudience = try file.decodeIfPresent(String.self, forKey: .authAudience)
        authIssuer = try file.decodeIfPresent(String.self, forKey: .authIssuer)
        authLeewayS = try file.decodeIfPresent(Int.self, forKey: .authLeewayS) ?? defaults.authLeewayS
        // A YAML mapping ({read: [public.>]}) or its JSON text.
        if let claim = try? file.decodeIfPresent(RightsYAML.self, forKey: .authAnonymous) {
            authAnonymous = claim.json
        } else {
            authAnonymous = try file.decodeIfPresent(String.self, forKey: .authAnonymous)
        }
        maxConnectionsPerSubject =
            try file.decodeIfPresent(Int.self, forKey: .maxConnectionsPerSubject) ?? defaults.maxConnectionsPerSubject
        trustedProxies = try file.decodeIfPresent([String].self, forKey: .trustedProxies) ?? defaults.trustedProxies
        backboneUser = try file.decodeIfPresent(String.self, forKey: .backboneUser)
        backbonePassword = try file.decodeIfPresent(String.self, forKey: .backbonePassword)
        backboneToken = try file.decodeIfPresent(String.self, forKey: .backboneToken)
        backboneCreds = try file.decodeIfPresent(String.self, forKey: .backboneCreds)
        backboneTlsCa = try file.decodeIfPresent(String.self, forKey: .backboneTlsCa)
        backboneTlsCert = try file.decodeIfPresent(String.self, forKey: .backboneTlsCert)
        backboneTlsKey = try file.decodeIfPresent(String.self, forKey: .backboneTlsKey)
    }

    /// Every key a configuration file may hold, as it is spelled there.
    public static var keys: [String] { CodingKeys.allCases.map(\.rawValue) }

    /// Reads a configuration file; an unknown key or a value of the wrong type is an error
    /// naming it.
    public static func load(yaml text: String, from path: String) throws(SettingsError) -> DaemonSettings {
        let node: Node?
        do {
            node = try Yams.compose(yaml: text)
        } catch {
            throw SettingsError("\(path): not YAML: \(error)")
        }
        guard let node else { return DaemonSettings() }
        guard let mapping = node.mapping else { throw SettingsError("\(path): expected key: value lines") }
        let known = Set(keys)
        for key in mapping.keys {
            guard let name = key.string, known.contains(name) else {
                throw SettingsError("\(path): unknown key '\(key.string ?? "?")' (line \(key.mark?.line ?? 0))")
            }
        }
        do {
            return try YAMLDecoder().decode(DaemonSettings.self, from: node)
        } catch let DecodingError.typeMismatch(type, context) {
            throw SettingsError(
                "\(path): '\(context.codingPath.map(\.stringValue).joined(separator: "."))' must be \(type)")
        } catch {
            throw SettingsError("\(path): \(error)")
        }
    }
}

/// `auth_anonymous` written as a YAML mapping, turned into the claim's JSON text.
struct RightsYAML: Decodable {
    let json: String

    private enum Keys: String, CodingKey, CaseIterable {
        case read, write, drop, admin
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Keys.self)
        var members: [JSONValue.Member] = []
        for key in [Keys.read, .write, .drop] {
            if let patterns = try container.decodeIfPresent([String].self, forKey: key) {
                members.append(.init(key.rawValue, .array(patterns.map(JSONValue.string))))
            }
        }
        if let admin = try container.decodeIfPresent(Bool.self, forKey: .admin) {
            members.append(.init("admin", .bool(admin)))
        }
        var output = JSONOutput()
        output.append(.object(members))
        json = String(decoding: output.bytes, as: UTF8.self)
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

/// A configuration that cannot be used, with the key and reason.
public struct SettingsError: Error, CustomStringConvertible {
    public let description: String

    public init(_ description: String) {
        self.description = description
    }
}

/// Settings turned into what the server, the store and the logger take, every value checked.
public struct ValidatedSettings: Sendable {
    public var server: ServerConfiguration
    public var store: StateStore.Options
    public var stateDirectory: String?
    public var logLevel: Logger.Level
    public var backbone: BackboneOptions?
    /// Settings that are valid but have no effect here, for the start to log.
    public var notices: [String] = []

    public init(_ settings: DaemonSettings) throws(SettingsError) {
        guard let level = Logger.Level(rawValue: settings.logLevel) else {
            throw SettingsError("log_level: expected trace, debug, info, notice, warning, error or critical")
        }
        guard let policy = ServerConfiguration.SlowSubscriberPolicy(rawValue: settings.slowSubscriberPolicy) else {
            throw SettingsError("slow_subscriber_policy: expected catch_up or disconnect")
        }
        guard let sync = SyncPolicy(rawValue: settings.sync) else {
            throw SettingsError("sync: expected always, interval or never")
        }
        let minimums: [(String, Int, Int)] = [
            ("max_line_bytes", settings.maxLineBytes, 1024), ("max_unsent_bytes", settings.maxUnsentBytes, 1024),
            ("coalesce_window_ms", settings.coalesceWindowMs, 0), ("history_versions", settings.historyVersions, 1),
            ("sync_interval_ms", settings.syncIntervalMs, 1),
            ("checkpoint_log_bytes", settings.checkpointLogBytes, 4096),
            ("max_connections", settings.maxConnections, 1), ("max_collections", settings.maxCollections, 1),
            ("max_items_per_collection", settings.maxItemsPerCollection, 1),
            ("backbone_lease_ms", settings.backboneLeaseMs, 100), ("backbone_replicas", settings.backboneReplicas, 1),
            ("backbone_snapshot_every", settings.backboneSnapshotEvery, 1),
        ]
        for (key, value, minimum) in minimums where value < minimum {
            throw SettingsError("\(key): at least \(minimum), got \(value)")
        }
        guard (0...1000).contains(settings.streamLingerMs) else {
            throw SettingsError("stream_linger_ms: 0 to 1000, got \(settings.streamLingerMs)")
        }
        guard (100...3_600_000).contains(settings.streamHeartbeatMs) else {
            throw SettingsError("stream_heartbeat_ms: 100 to 3600000, got \(settings.streamHeartbeatMs)")
        }
        guard (1...64).contains(settings.ioThreads) else {
            throw SettingsError("io_threads: 1 to 64, got \(settings.ioThreads)")
        }
        if let token = settings.tcpToken, token.isEmpty {
            throw SettingsError("tcp_token: must not be empty")
        }
        for (key, address, example) in [
            ("metrics", settings.metrics, "127.0.0.1:9464"), ("tcp", settings.tcp, "127.0.0.1:7000"),
            ("http", settings.http, "127.0.0.1:8080"),
        ] {
            guard let address else { continue }
            let port = address.split(separator: ":").last.flatMap { UInt16($0) }
            guard address.contains(":"), let port, port > 0, !address.hasPrefix(":") else {
                throw SettingsError("\(key): expected IP:PORT (e.g. \(example)), got '\(address)'")
            }
        }
        for (key, address) in [("tcp", settings.tcp), ("http", settings.http)] {
            guard let address, settings.tcpToken == nil, settings.authKeys == nil, !Self.isLoopback(address) else {
                continue
            }
            throw SettingsError(
                "\(key): '\(address)' is reachable from other machines and neither tcp_token nor auth_keys is set: "
                    + "anyone could read and write; set auth_keys (--auth-keys) or tcp_token (--tcp-token), or listen "
                    + "on a loopback address (127.0.0.1, [::1])")
        }
        guard (0...3600).contains(settings.authLeewayS) else {
            throw SettingsError("auth_leeway_s: 0 to 3600, got \(settings.authLeewayS)")
        }
        guard settings.maxConnectionsPerSubject >= 1 else {
            throw SettingsError("max_connections_per_subject: at least 1, got \(settings.maxConnectionsPerSubject)")
        }
        if let backbone = settings.backbone {
            let servers = backbone.split(separator: ",").map { $0.trimmingPrefix(" ") }.map(String.init)
            guard !servers.isEmpty, servers.allSatisfy({ $0.hasPrefix("nats://") || $0.hasPrefix("tls://") }) else {
                throw SettingsError("backbone: expected nats://HOST:PORT URLs separated by commas, got '\(backbone)'")
            }
            if let directory = settings.stateDir {
                // The packaged unit always passes --state-dir: joining a backbone must not mean
                // editing the unit. The start logs this.
                notices.append(
                    "state_dir \(directory) is not used: with a backbone the shared log (JetStream) keeps the state")
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
            self.backbone = BackboneOptions(
                servers: servers, leaseMilliseconds: settings.backboneLeaseMs, mayOwn: settings.backboneOwner,
                replicas: settings.backboneReplicas, credentials: credentials)
        }
        var server = ServerConfiguration(socketPath: settings.socket)
        server.tcpAddress = settings.tcp
        server.tcpToken = settings.tcpToken
        server.metricsAddress = settings.metrics
        server.httpAddress = settings.http
        server.httpOrigins = settings.httpOrigins
        server.streamLingerMilliseconds = UInt64(settings.streamLingerMs)
        server.streamHeartbeatMilliseconds = UInt64(settings.streamHeartbeatMs)
        server.ioThreads = settings.ioThreads
        server.maximumLineBytes = settings.maxLineBytes
        server.maximumUnsentBytes = settings.maxUnsentBytes
        server.slowSubscriberPolicy = policy
        server.coalesceWindowMilliseconds = settings.coalesceWindowMs
        server.history.versions = settings.historyVersions
        server.maximumConnections = settings.maxConnections
        server.backboneSnapshotEvery = settings.backboneSnapshotEvery
        server.limits = CollectionLimits(
            collections: settings.maxCollections, itemsPerCollection: settings.maxItemsPerCollection)
        do {
            server.publishers = try AccessList(parsing: settings.publishers.joined(separator: ","))
            server.subscribers = try AccessList(parsing: settings.subscribers.joined(separator: ","))
        } catch {
            throw SettingsError("publishers/subscribers: \(error)")
        }
        if let path = settings.authKeys {
            do {
                server.tokenVerifier = TokenVerifier(
                    keys: try KeySet.loadWaiting(path: path), audience: settings.authAudience,
                    issuer: settings.authIssuer,
                    leewaySeconds: Double(settings.authLeewayS))
            } catch {
                throw SettingsError("auth_keys: \(error)")
            }
        } else if settings.authAudience != nil || settings.authIssuer != nil {
            throw SettingsError("auth_audience and auth_issuer need auth_keys (the key set tokens are verified with)")
        }
        if let anonymous = settings.authAnonymous {
            do {
                server.anonymousRights = try Rights(claimText: anonymous)
            } catch {
                throw SettingsError("auth_anonymous: \(error) (expected e.g. {\"read\": [\"public.>\"]})")
            }
        }
        server.maximumConnectionsPerSubject = settings.maxConnectionsPerSubject
        server.trustedProxies = settings.trustedProxies
        var store = StateStore.Options()
        store.sync = sync
        store.syncIntervalMilliseconds = settings.syncIntervalMs
        store.checkpointLogBytes = settings.checkpointLogBytes
        self.server = server
        self.store = store
        self.stateDirectory = backbone == nil ? settings.stateDir : nil
        self.logLevel = level
    }

    /// Whether a `HOST:PORT` names a loopback address (127.0.0.0/8, ::1, localhost).
    static func isLoopback(_ address: String) -> Bool {
        guard let colon = address.lastIndex(of: ":") else { return false }
        let host = address[..<colon].filter { $0 != "[" && $0 != "]" }
        return host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }

    /// The settings that differ between two configurations and need a restart to take effect.
    public static func changesNeedingRestart(from old: DaemonSettings, to new: DaemonSettings) -> [String] {
        var keys: [String] = []
        if old.socket != new.socket { keys.append("socket") }
        if old.tcp != new.tcp { keys.append("tcp") }
        if old.metrics != new.metrics { keys.append("metrics") }
        if old.http != new.http || old.httpOrigins != new.httpOrigins { keys.append("http") }
        if old.streamLingerMs != new.streamLingerMs { keys.append("stream_linger_ms") }
        if old.streamHeartbeatMs != new.streamHeartbeatMs { keys.append("stream_heartbeat_ms") }
        if old.ioThreads != new.ioThreads { keys.append("io_threads") }
        if old.stateDir != new.stateDir { keys.append("state_dir") }
        if old.sync != new.sync { keys.append("sync") }
        if old.syncIntervalMs != new.syncIntervalMs { keys.append("sync_interval_ms") }
        if old.checkpointLogBytes != new.checkpointLogBytes { keys.append("checkpoint_log_bytes") }
        if old.coalesceWindowMs != new.coalesceWindowMs { keys.append("coalesce_window_ms") }
        if old.historyVersions != new.historyVersions { keys.append("history_versions") }
        if old.backbone != new.backbone || old.backboneLeaseMs != new.backboneLeaseMs
            || old.backboneUser != new.backboneUser || old.backbonePassword != new.backbonePassword
            || old.backboneToken != new.backboneToken || old.backboneCreds != new.backboneCreds
            || old.backboneTlsCa != new.backboneTlsCa || old.backboneTlsCert != new.backboneTlsCert
            || old.backboneTlsKey != new.backboneTlsKey
            || old.backboneOwner != new.backboneOwner || old.backboneReplicas != new.backboneReplicas
            || old.backboneSnapshotEvery != new.backboneSnapshotEvery
        {
            keys.append("backbone")
        }
        return keys
    }
}

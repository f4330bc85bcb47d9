import Yams

/// The values of every setting of `diffcastd`, each with its default: `DaemonSettings()` is the
/// configuration built into the daemon, which `config/diffcastd.yaml` writes out. What each
/// setting is (key, option, accepted values, reload, help) is described once, in `all`.
public struct DaemonSettings: Equatable, Sendable {
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
    public var tcpSendBufferBytes = 0
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

    /// Every setting, in the order of `config/diffcastd.yaml`.
    public static let all: [Setting] = [
        Setting("socket", .text(\.socket), .afterRestart, "Unix socket to listen on (also $DIFFCAST_SOCKET)."),
        Setting(
            "tcp", .optionalText(\.tcp, .address(example: "127.0.0.1:7000")), .afterRestart,
            "Also listen on TCP at HOST:PORT (use a loopback address)."),
        Setting(
            "tcp_token", .optionalText(\.tcpToken, .nonEmpty), .onReload,
            "Token a TCP or HTTP client presents ({\"op\":\"auth\",\"token\":…}) before anything but ping."),
        Setting(
            "metrics", .optionalText(\.metrics, .address(example: "127.0.0.1:9464")), .afterRestart,
            "Serve Prometheus metrics at http://HOST:PORT/metrics (use a loopback address)."),
        Setting(
            "http", .optionalText(\.http, .address(example: "127.0.0.1:8080")), .afterRestart,
            "Serve HTTP at HOST:PORT: the API, Server-Sent Events, WebSocket and the inspector page."),
        Setting(
            "http_origins", .list(\.httpOrigins), .afterRestart,
            "Origins whose pages may call the HTTP API, comma-separated (* for any)."),
        Setting(
            "stream_linger_ms", .integer(\.streamLingerMs, 0...1000), .afterRestart,
            "Milliseconds an SSE or WebSocket stream's events wait at least to be written together (0: at once)."),
        Setting(
            "stream_heartbeat_ms", .integer(\.streamHeartbeatMs, 100...3_600_000), .afterRestart,
            "Milliseconds between the comment lines that keep an idle SSE stream open through proxies."),
        Setting(
            "io_threads", .integer(\.ioThreads, 1...64), .afterRestart,
            "Threads that write to subscribers together: the loop and io_threads - 1 helpers."),
        Setting(
            "log_level",
            .choice(\.logLevel, choices: ["trace", "debug", "info", "notice", "warning", "error", "critical"]),
            .onReload, "Least severe log message written."),
        Setting(
            "max_line_bytes", .integer(\.maxLineBytes, 1024...Int.max), .onReload, "Longest request line in bytes."),
        Setting(
            "max_unsent_bytes", .integer(\.maxUnsentBytes, 1024...Int.max), .onReload,
            "Unsent bytes a subscriber may have queued before it is caught up later (or disconnected)."),
        Setting(
            "tcp_send_buffer_bytes", .integer(\.tcpSendBufferBytes, 0...(1 << 30)), .afterRestart,
            "Kernel send buffer of each TCP connection (SO_SNDBUF); 0: the kernel sizes it (up to tcp_wmem)."),
        Setting(
            "slow_subscriber_policy", .choice(\.slowSubscriberPolicy, choices: ["catch_up", "disconnect"]), .onReload,
            "What happens to a subscriber past max_unsent_bytes."),
        Setting(
            "coalesce_window_ms", .integer(\.coalesceWindowMs, 0...Int.max), .afterRestart,
            "Extra milliseconds the apply queue waits to coalesce writes (0: none)."),
        Setting(
            "history_versions", .integer(\.historyVersions, 1...Int.max), .afterRestart,
            "Versions of history kept per collection for catch-up changesets."),
        Setting(
            "state_dir", .optionalText(\.stateDir, .any), .afterRestart,
            "Directory for the write-ahead log and checkpoints (null: state in memory only)."),
        Setting(
            "sync", .choice(\.sync, choices: ["always", "interval", "never"]), .afterRestart,
            "always (fsync before every acknowledgement), interval or never."),
        Setting(
            "sync_interval_ms", .integer(\.syncIntervalMs, 1...Int.max), .afterRestart,
            "With sync interval: longest time acknowledged writes wait for an fsync."),
        Setting(
            "checkpoint_log_bytes", .integer(\.checkpointLogBytes, 4096...Int.max), .afterRestart,
            "Log size in bytes past which the log is folded into a checkpoint."),
        Setting("max_connections", .integer(\.maxConnections, 1...Int.max), .onReload, "Client connections at once."),
        Setting("max_collections", .integer(\.maxCollections, 1...Int.max), .onReload, "Collections at once."),
        Setting(
            "max_items_per_collection", .integer(\.maxItemsPerCollection, 1...Int.max), .onReload,
            "Items in one collection."),
        Setting(
            "publishers", .list(\.publishers), .onReload,
            "Who may write on the Unix socket: uid:N, gid:N, user:NAME, group:NAME, comma-separated."),
        Setting(
            "subscribers", .list(\.subscribers), .onReload,
            "Who may get, list and subscribe on the Unix socket, in the same form."),
        Setting(
            "backbone", .optionalText(\.backbone, .any), .afterRestart,
            "NATS servers (nats://HOST:PORT,…) of a backbone shared with other daemons."),
        Setting(
            "backbone_lease_ms", .integer(\.backboneLeaseMs, 100...Int.max), .afterRestart,
            "How long a backbone lease lasts unrenewed, in milliseconds."),
        Setting(
            "backbone_owner", .flag(\.backboneOwner), .afterRestart,
            "Whether this daemon takes backbone leases (false: it forwards every write)."),
        Setting(
            "backbone_replicas", .integer(\.backboneReplicas, 1...Int.max), .afterRestart,
            "Copies the NATS cluster keeps of the shared log and the leases."),
        Setting(
            "backbone_snapshot_every", .integer(\.backboneSnapshotEvery, 1...Int.max), .afterRestart,
            "Log messages of a collection between two snapshots, which bound what a joining daemon replays."),
        Setting(
            "auth_keys", .optionalText(\.authKeys, .any), .onReload,
            "JSON Web Key Set file that capability tokens are verified against."),
        Setting(
            "auth_audience", .optionalText(\.authAudience, .any), .onReload,
            "Audience a token's aud must name (checked only when set)."),
        Setting(
            "auth_issuer", .optionalText(\.authIssuer, .any), .onReload,
            "Issuer a token's iss must be (checked only when set)."),
        Setting(
            "auth_leeway_s", .integer(\.authLeewayS, 0...3600), .onReload,
            "Seconds of clock difference forgiven on a token's exp and nbf."),
        Setting(
            "auth_anonymous", .rights(\.authAnonymous), .onReload,
            "Rights of clients that present no token, as a diffcast claim."),
        Setting(
            "max_connections_per_subject", .integer(\.maxConnectionsPerSubject, 1...Int.max), .onReload,
            "Connections that tokens with one sub may hold at once."),
        Setting(
            "trusted_proxies", .list(\.trustedProxies), .onReload,
            "Addresses of reverse proxies whose X-Forwarded-For names the client, comma-separated."),
        Setting(
            "backbone_user", .optionalText(\.backboneUser, .any), .afterRestart,
            "User name for the backbone's NATS servers (with backbone_password)."),
        Setting(
            "backbone_password", .optionalText(\.backbonePassword, .any), .afterRestart,
            "Password for the backbone's NATS servers."),
        Setting(
            "backbone_token", .optionalText(\.backboneToken, .any), .afterRestart,
            "Token for the backbone's NATS servers."),
        Setting(
            "backbone_creds", .optionalText(\.backboneCreds, .any), .afterRestart,
            "A NATS .creds file (user JWT and NKey seed) for the backbone."),
        Setting(
            "backbone_tls_ca", .optionalText(\.backboneTlsCa, .any), .afterRestart,
            "CA certificates for TLS to the backbone's NATS servers."),
        Setting(
            "backbone_tls_cert", .optionalText(\.backboneTlsCert, .any), .afterRestart,
            "This daemon's TLS certificate chain for the NATS servers."),
        Setting(
            "backbone_tls_key", .optionalText(\.backboneTlsKey, .any), .afterRestart,
            "The key of backbone_tls_cert."),
    ]

    /// Every key a configuration file may hold, as it is spelled there.
    public static var keys: [String] { all.map(\.key) }

    /// Reads a configuration file over the defaults: a key it leaves out (or sets to `null`)
    /// keeps its default; an unknown key or a value of the wrong type is an error naming it.
    public static func load(yaml text: String, from path: String) throws(SettingsError) -> DaemonSettings {
        var settings = DaemonSettings()
        let node: Node?
        do {
            node = try Yams.compose(yaml: text)
        } catch {
            throw SettingsError("\(path): not YAML: \(error)")
        }
        guard let node else { return settings }
        guard let mapping = node.mapping else { throw SettingsError("\(path): expected key: value lines") }
        for (key, value) in mapping {
            guard let name = key.string, let setting = all.first(where: { $0.key == name }) else {
                throw SettingsError("\(path): unknown key '\(key.string ?? "?")' (line \(key.mark?.line ?? 0))")
            }
            do {
                try setting.read(value, into: &settings)
            } catch {
                throw SettingsError("\(path): \(error) (line \(key.mark?.line ?? 0))")
            }
        }
        return settings
    }

    /// Applies command-line options (`--max-line-bytes 4096` or `--max-line-bytes=4096`) over
    /// these settings; an unknown option, a missing or a mistyped argument is an error naming it.
    public mutating func apply(options arguments: [String]) throws(SettingsError) {
        var remaining = arguments[...]
        while let argument = remaining.popFirst() {
            guard argument.hasPrefix("--") else { throw SettingsError("unexpected argument '\(argument)'") }
            let parts = argument.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(parts[0])
            guard let setting = Self.all.first(where: { $0.option == name }) else {
                throw SettingsError("unknown option '\(name)' (diffcastd --help lists them)")
            }
            let value: String
            if parts.count == 2 {
                value = String(parts[1])
            } else if let next = remaining.popFirst() {
                value = next
            } else {
                throw SettingsError("\(name): expected a value")
            }
            try setting.read(option: value, into: &self)
        }
    }

    /// Refuses any value outside what its setting accepts, naming the key.
    public func checkEachValue() throws(SettingsError) {
        for setting in Self.all { try setting.check(self) }
    }

    /// The keys whose values differ between two configurations and take effect only after a
    /// restart.
    public static func changesNeedingRestart(from old: DaemonSettings, to new: DaemonSettings) -> [String] {
        all.filter { $0.applies == .afterRestart && $0.differs(old, new) }.map(\.key)
    }

    /// The options of every setting, with their defaults, for `diffcastd --help`: each option on
    /// a line of its own, its help below, indented and wrapped within 80 columns.
    public static var optionsHelp: String {
        let defaults = DaemonSettings()
        return all.map { setting in
            let reload = setting.applies == .onReload ? "; SIGHUP applies it" : ""
            let help = "\(setting.help) (\(setting.key): \(setting.shown(in: defaults))\(reload))"
            return "  \(setting.option) <\(setting.argumentName)>\n" + wrapped(help, indent: 6, width: 80)
        }.joined(separator: "\n")
    }

    /// Words laid out in lines of at most `width` columns, each indented.
    static func wrapped(_ text: String, indent: Int, width: Int) -> String {
        let margin = String(repeating: " ", count: indent)
        var lines: [String] = []
        var line = ""
        for word in text.split(separator: " ") {
            if !line.isEmpty, indent + line.count + 1 + word.count > width {
                lines.append(margin + line)
                line = ""
            }
            line += line.isEmpty ? String(word) : " " + word
        }
        lines.append(margin + line)
        return lines.joined(separator: "\n")
    }
}

/// A configuration that cannot be used, with the key and reason.
public struct SettingsError: Error, CustomStringConvertible {
    public let description: String

    public init(_ description: String) {
        self.description = description
    }
}

import ArgumentParser
import CBuildInfo
import DiffcastBackbone
import DiffcastConfiguration
import DiffcastEngine
import DiffcastServer
import DiffcastStorage
import Foundation
import Logging

/// The daemon's command line. Settings come from the embedded defaults, then the file given
/// with `--config`, then these options; `config/diffcastd.yaml` documents every key.
@main
struct Diffcastd: ParsableCommand {
    static let version = String(cString: diffcast_version())

    static let configuration = CommandConfiguration(
        commandName: "diffcastd",
        abstract: "Holds named collections of sections and items and publishes minimal changesets to subscribers.",
        discussion: """
            Clients connect to the Unix socket (nc -U) and send one request per line; see
            /usr/share/doc/diffcast/README.md and the protocol in /usr/share/doc/diffcast/protocol.md.
            """,
        version: "diffcastd \(version) (commit \(String(cString: diffcast_build_commit())))")

    @Option(help: "Configuration file (YAML); SIGHUP re-reads it.")
    var config: String?

    @Option(help: "Check a configuration file, print the result and exit.")
    var checkConfig: String?

    @Option(
        help: ArgumentHelp(
            "Check a state directory (checkpoint and write-ahead log) without starting or changing it; "
                + "exits 1 naming the damaged file and offset.", valueName: "dir"))
    var verifyState: String?

    @Option(help: "Unix socket to listen on (default: $DIFFCAST_SOCKET, else /tmp/diffcast.sock).")
    var socket: String?

    @Option(help: "Also listen on TCP at HOST:PORT (off by default; use a loopback address).")
    var tcp: String?

    @Option(help: "Token a TCP client must present with {\"op\":\"auth\",\"token\":…} before writing.")
    var tcpToken: String?

    @Option(help: "Serve Prometheus metrics at http://HOST:PORT/metrics (off by default; use a loopback address).")
    var metrics: String?

    @Option(
        help: "Serve HTTP at HOST:PORT: the API, Server-Sent Events, WebSocket and the inspector page (off by default)."
    )
    var http: String?

    @Option(help: "Origins whose pages may call the HTTP API, comma-separated (* for any).")
    var httpOrigins: String?

    @Option(help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: String?

    @Option(help: "Longest request line in bytes.")
    var maxLineBytes: Int?

    @Option(help: "Unsent bytes a subscriber may have queued before it is caught up later (or disconnected).")
    var maxUnsentBytes: Int?

    @Option(help: "catch_up or disconnect: what happens to a subscriber past --max-unsent-bytes.")
    var slowSubscriberPolicy: String?

    @Option(help: "Extra milliseconds the apply queue waits to coalesce writes (0: none).")
    var coalesceWindowMs: Int?

    @Option(
        help:
            "Milliseconds an SSE or WebSocket stream's events wait at least to be written together (0: at once).")
    var streamLingerMs: Int?

    @Option(help: "Milliseconds between the comment lines that keep an idle SSE stream open through proxies.")
    var streamHeartbeatMs: Int?

    @Option(
        help: "Threads that write to subscribers together: the loop and io_threads - 1 helpers (1: the loop alone).")
    var ioThreads: Int?

    @Option(help: "Versions of history kept per collection for catch-up changesets.")
    var historyVersions: Int?

    @Option(help: "Directory for the write-ahead log and checkpoints (default: state in memory only).")
    var stateDir: String?

    @Option(help: "always (fsync before every acknowledgement), interval or never.")
    var sync: String?

    @Option(help: "With --sync interval: longest time acknowledged writes wait for an fsync.")
    var syncIntervalMs: Int?

    @Option(help: "Log size in bytes past which the log is folded into a checkpoint.")
    var checkpointLogBytes: Int?

    @Option(help: "Client connections at once.")
    var maxConnections: Int?

    @Option(help: "Collections at once.")
    var maxCollections: Int?

    @Option(help: "Items in one collection.")
    var maxItemsPerCollection: Int?

    @Option(help: "Who may write on the Unix socket: uid:N, gid:N, user:NAME, group:NAME, comma-separated.")
    var publishers: String?

    @Option(help: "Who may get, list and subscribe on the Unix socket, in the same form.")
    var subscribers: String?

    @Option(help: "NATS servers (nats://HOST:PORT,…) of a backbone shared with other daemons.")
    var backbone: String?

    @Option(help: "How long a backbone lease lasts unrenewed, in milliseconds.")
    var backboneLeaseMs: Int?

    @Option(help: "true or false: whether this daemon takes backbone leases (false: it forwards every write).")
    var backboneOwner: Bool?

    @Option(help: "Copies the NATS cluster keeps of the shared log and the leases.")
    var backboneReplicas: Int?

    @Option(help: "Log messages of a collection between two snapshots, which bound what a joining daemon replays.")
    var backboneSnapshotEvery: Int?

    @Option(help: "JSON Web Key Set file that capability tokens are verified against (SIGHUP re-reads it).")
    var authKeys: String?

    @Option(help: "Audience a token's aud must name (checked only when set).")
    var authAudience: String?

    @Option(help: "Issuer a token's iss must be (checked only when set).")
    var authIssuer: String?

    @Option(help: "Seconds of clock difference forgiven on a token's exp and nbf.")
    var authLeewayS: Int?

    @Option(help: ArgumentHelp("Rights of clients that present no token, as a diffcast claim.", valueName: "json"))
    var authAnonymous: String?

    @Option(help: "Connections that tokens with one sub may hold at once.")
    var maxConnectionsPerSubject: Int?

    @Option(help: "Addresses of reverse proxies whose X-Forwarded-For names the client, comma-separated.")
    var trustedProxies: String?

    @Option(help: "User name for the backbone's NATS servers (with --backbone-password).")
    var backboneUser: String?

    @Option(help: "Password for the backbone's NATS servers.")
    var backbonePassword: String?

    @Option(help: "Token for the backbone's NATS servers.")
    var backboneToken: String?

    @Option(help: ArgumentHelp("A NATS .creds file (user JWT and NKey seed) for the backbone.", valueName: "file"))
    var backboneCreds: String?

    @Option(help: ArgumentHelp("CA certificates for TLS to the backbone's NATS servers.", valueName: "file"))
    var backboneTlsCa: String?

    @Option(help: ArgumentHelp("This daemon's TLS certificate chain for the NATS servers.", valueName: "file"))
    var backboneTlsCert: String?

    @Option(help: ArgumentHelp("The key of --backbone-tls-cert.", valueName: "file"))
    var backboneTlsKey: String?

    func run() throws {
        if let verifyState {
            do {
                print(try StateStore.verify(directory: verifyState))
                return
            } catch {
                print("\(verifyState): \(error)")
                throw ExitCode(1)
            }
        }
        if let checkConfig {
            do {
                _ = try ValidatedSettings(try settings(configFile: checkConfig))
                print("\(checkConfig): ok")
                return
            } catch {
                print("\(error)")
                throw ExitCode(1)
            }
        }
        let initial: DaemonSettings
        let validated: ValidatedSettings
        do {
            initial = try settings(configFile: config)
            validated = try ValidatedSettings(initial)
        } catch {
            FileHandle.standardError.write(Data("diffcastd: \(error)\n".utf8))
            throw ExitCode(1)
        }
        ReloadableLogHandler.level.withLock { $0 = validated.logLevel }
        LoggingSystem.bootstrap { ReloadableLogHandler(label: $0) }
        let logger = Logger(label: "diffcastd")
        for notice in validated.notices { logger.notice("\(notice)") }
        let descriptors = raiseFileDescriptorLimit()
        // Listeners, the loop's own handles, the state directory and NATS take a few descriptors.
        let reserved = 64
        if let descriptors, validated.server.maximumConnections > descriptors - reserved {
            logger.warning(
                "max_connections is above what this process's descriptors allow",
                metadata: [
                    "max_connections": "\(validated.server.maximumConnections)",
                    "descriptors": "\(descriptors)", "connections it can hold": "\(max(0, descriptors - reserved))",
                ])
        }
        let environment = ProcessInfo.processInfo.environment
        let server = Server(
            configuration: validated.server, logger: logger, systemd: SystemdIntegration(environment: environment))
        server.reloadConfiguration = { reload(from: initial, logger: logger) }
        do {
            let engine = ApplyEngine(
                historyLimits: validated.server.history, limits: validated.server.limits,
                requestLimits: validated.server.requestLimits, logger: logger)
            var commit: (any BatchCommit)?
            if let directory = validated.stateDirectory {
                let store = try StateStore(directory: directory, options: validated.store, logger: logger)
                try store.recover(into: engine)
                commit = WriteAheadLogCommit(engine: engine, store: store) { error in
                    // Fail-stop only where nothing else is safe: the log could not be cut back to
                    // its last good record (a full disk alone is answered `unavailable`).
                    logger.critical("cannot keep the state directory consistent, stopping: \(error)")
                    Foundation.exit(70)
                }
            }
            var backbone: NATSBackbone?
            if let options = validated.backbone {
                var settings = NATSBackbone.Settings(servers: options.servers)
                settings.leaseMilliseconds = options.leaseMilliseconds
                settings.mayOwn = options.mayOwn
                settings.replicas = options.replicas
                settings.credentials = options.credentials
                backbone = try NATSBackbone(settings: settings, logger: logger)
            }
            let state =
                validated.stateDirectory.map { "\($0) (sync \(validated.store.sync.rawValue))" }
                ?? (backbone != nil ? "shared through the backbone" : "in memory only: a restart loses everything")
            try server.run(engine: engine, commit: commit, backbone: backbone) {
                logger.info(
                    "ready",
                    metadata: [
                        "listening": "\(server.listenerNames.joined(separator: ", "))", "state": "\(state)",
                        "version": "\(Self.version)",
                    ])
            }
        } catch {
            logger.critical("cannot start: \(error)")
            throw ExitCode(1)
        }
        logger.info("stopped")
    }

    /// The defaults, overridden by the file (if any), overridden by the options given.
    private func settings(configFile: String?) throws -> DaemonSettings {
        var settings = DaemonSettings()
        if let configFile {
            let text: String
            do {
                text = try String(contentsOfFile: configFile, encoding: .utf8)
            } catch {
                throw SettingsError("\(configFile): cannot read: \(error.localizedDescription)")
            }
            settings = try DaemonSettings.load(yaml: text, from: configFile)
        }
        if let environmentSocket = ProcessInfo.processInfo.environment["DIFFCAST_SOCKET"], !environmentSocket.isEmpty {
            settings.socket = environmentSocket
        }
        if let socket { settings.socket = socket }
        if let tcp { settings.tcp = tcp }
        if let tcpToken { settings.tcpToken = tcpToken }
        if let metrics { settings.metrics = metrics }
        if let http { settings.http = http }
        if let httpOrigins { settings.httpOrigins = httpOrigins.split(separator: ",").map(String.init) }
        if let logLevel { settings.logLevel = logLevel }
        if let maxLineBytes { settings.maxLineBytes = maxLineBytes }
        if let maxUnsentBytes { settings.maxUnsentBytes = maxUnsentBytes }
        if let slowSubscriberPolicy { settings.slowSubscriberPolicy = slowSubscriberPolicy }
        if let coalesceWindowMs { settings.coalesceWindowMs = coalesceWindowMs }
        if let streamLingerMs { settings.streamLingerMs = streamLingerMs }
        if let streamHeartbeatMs { settings.streamHeartbeatMs = streamHeartbeatMs }
        if let ioThreads { settings.ioThreads = ioThreads }
        if let historyVersions { settings.historyVersions = historyVersions }
        if let stateDir { settings.stateDir = stateDir }
        if let sync { settings.sync = sync }
        if let syncIntervalMs { settings.syncIntervalMs = syncIntervalMs }
        if let checkpointLogBytes { settings.checkpointLogBytes = checkpointLogBytes }
        if let maxConnections { settings.maxConnections = maxConnections }
        if let maxCollections { settings.maxCollections = maxCollections }
        if let maxItemsPerCollection { settings.maxItemsPerCollection = maxItemsPerCollection }
        if let publishers { settings.publishers = publishers.split(separator: ",").map(String.init) }
        if let subscribers { settings.subscribers = subscribers.split(separator: ",").map(String.init) }
        if let backbone { settings.backbone = backbone }
        if let backboneLeaseMs { settings.backboneLeaseMs = backboneLeaseMs }
        if let backboneOwner { settings.backboneOwner = backboneOwner }
        if let backboneReplicas { settings.backboneReplicas = backboneReplicas }
        if let backboneSnapshotEvery { settings.backboneSnapshotEvery = backboneSnapshotEvery }
        if let authKeys { settings.authKeys = authKeys }
        if let authAudience { settings.authAudience = authAudience }
        if let authIssuer { settings.authIssuer = authIssuer }
        if let authLeewayS { settings.authLeewayS = authLeewayS }
        if let authAnonymous { settings.authAnonymous = authAnonymous }
        if let maxConnectionsPerSubject { settings.maxConnectionsPerSubject = maxConnectionsPerSubject }
        if let trustedProxies { settings.trustedProxies = trustedProxies.split(separator: ",").map(String.init) }
        if let backboneUser { settings.backboneUser = backboneUser }
        if let backbonePassword { settings.backbonePassword = backbonePassword }
        if let backboneToken { settings.backboneToken = backboneToken }
        if let backboneCreds { settings.backboneCreds = backboneCreds }
        if let backboneTlsCa { settings.backboneTlsCa = backboneTlsCa }
        if let backboneTlsCert { settings.backboneTlsCert = backboneTlsCert }
        if let backboneTlsKey { settings.backboneTlsKey = backboneTlsKey }
        return settings
    }

    /// SIGHUP: re-reads the file (options given on the command line still win) and returns
    /// what to apply, or nil when the file is unusable, which is logged and changes nothing.
    private func reload(from initial: DaemonSettings, logger: Logger) -> ServerConfiguration? {
        do {
            let fresh = try settings(configFile: config)
            let validated = try ValidatedSettings(fresh)
            let needRestart = ValidatedSettings.changesNeedingRestart(from: initial, to: fresh)
            if !needRestart.isEmpty {
                logger.warning(
                    "changed settings take effect only after a restart", metadata: ["keys": "\(needRestart)"])
            }
            ReloadableLogHandler.level.withLock { $0 = validated.logLevel }
            return validated.server
        } catch {
            logger.error("reload failed, keeping the running configuration: \(error)")
            return nil
        }
    }

    /// Every client is a file descriptor: take the hard limit, not the usual soft 1024. Returns
    /// the descriptors the process may now hold (nil when the limit cannot be read).
    private func raiseFileDescriptorLimit() -> Int? {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return nil }
        limit.rlim_cur = limit.rlim_max
        _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return nil }
        return limit.rlim_cur > UInt(Int.max) ? Int.max : Int(limit.rlim_cur)
    }
}

import ArgumentParser
import DiffcastServer
import Logging

#if canImport(Glibc)
    import Glibc
#endif

/// The daemon's command line: where to listen, how to log, and the limits that matter.
@main
struct Diffcastd: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "diffcastd",
        abstract: "Holds named collections of sections and items and publishes minimal changesets to subscribers.")

    @Option(help: "Unix socket to listen on (default: $DIFFCAST_SOCKET, else /tmp/diffcast.sock).")
    var socket: String?

    @Option(help: "Also listen on TCP at HOST:PORT (off by default; use a loopback address).")
    var tcp: String?

    @Option(help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: String = "info"

    @Option(help: "Longest request line in bytes.")
    var maxLineBytes: Int = 16 * 1024 * 1024

    @Option(help: "Unsent bytes a subscriber may have queued before it is caught up later (or disconnected).")
    var maxUnsentBytes: Int = 8 * 1024 * 1024

    @Option(help: "catch_up or disconnect: what happens to a subscriber past --max-unsent-bytes.")
    var slowSubscriberPolicy: String = "catch_up"

    @Option(help: "Extra milliseconds the apply queue waits to coalesce writes (0: none).")
    var coalesceWindowMs: Int = 0

    @Option(help: "Versions of history kept per collection for catch-up changesets.")
    var historyVersions: Int = 64

    @Option(help: "Token a TCP client must present with {\"op\":\"auth\",\"token\":…} before writing.")
    var tcpToken: String?

    @Option(help: "Client connections at once.")
    var maxConnections: Int = 10_000

    @Option(help: "Collections at once.")
    var maxCollections: Int = 100_000

    @Option(help: "Items in one collection.")
    var maxItemsPerCollection: Int = 10_000_000

    @Option(
        help:
            "Who may write on the Unix socket: uid:N, gid:N, user:NAME, group:NAME, comma-separated (default: anyone who can open the socket; root always may)."
    )
    var publishers: String = ""

    @Option(
        help:
            "Who may get, list and subscribe on the Unix socket, in the same form (default: anyone who can open the socket)."
    )
    var subscribers: String = ""

    @Option(help: "Directory for the write-ahead log and checkpoints (default: state in memory only).")
    var stateDir: String?

    @Option(help: "always (fsync before every acknowledgement), interval or never.")
    var sync: String = "always"

    @Option(help: "With --sync interval: longest time acknowledged writes wait for an fsync.")
    var syncIntervalMs: Int = 100

    @Option(help: "Log size in bytes past which the log is folded into a checkpoint.")
    var checkpointLogBytes: Int = 64 * 1024 * 1024

    mutating func validate() throws {
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw ValidationError("--log-level: unknown level '\(logLevel)'")
        }
        guard ServerConfiguration.SlowSubscriberPolicy(rawValue: slowSubscriberPolicy) != nil else {
            throw ValidationError(
                "--slow-subscriber-policy: expected catch_up or disconnect, got '\(slowSubscriberPolicy)'")
        }
        guard maxLineBytes >= 1024 else { throw ValidationError("--max-line-bytes: at least 1024") }
        guard maxUnsentBytes >= 1024 else { throw ValidationError("--max-unsent-bytes: at least 1024") }
        guard coalesceWindowMs >= 0 else { throw ValidationError("--coalesce-window-ms: not negative") }
        guard historyVersions >= 1 else { throw ValidationError("--history-versions: at least 1") }
        guard SyncPolicy(rawValue: sync) != nil else {
            throw ValidationError("--sync: expected always, interval or never, got '\(sync)'")
        }
        guard syncIntervalMs >= 1 else { throw ValidationError("--sync-interval-ms: at least 1") }
        guard checkpointLogBytes >= 4096 else { throw ValidationError("--checkpoint-log-bytes: at least 4096") }
        for (name, value) in [
            ("--max-connections", maxConnections), ("--max-collections", maxCollections),
            ("--max-items-per-collection", maxItemsPerCollection),
        ] where value < 1 {
            throw ValidationError("\(name): at least 1")
        }
        do {
            _ = try AccessList(parsing: publishers)
            _ = try AccessList(parsing: subscribers)
        } catch {
            throw ValidationError("--publishers/--subscribers: \(error)")
        }
    }

    func run() throws {
        let level = Logger.Level(rawValue: logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "diffcastd")
        raiseFileDescriptorLimit()
        var settings = ServerConfiguration(socketPath: socket ?? environment("DIFFCAST_SOCKET") ?? "/tmp/diffcast.sock")
        settings.tcpAddress = tcp
        settings.maximumLineBytes = maxLineBytes
        settings.maximumUnsentBytes = maxUnsentBytes
        settings.slowSubscriberPolicy = .init(rawValue: slowSubscriberPolicy) ?? .catchUp
        settings.coalesceWindowMilliseconds = coalesceWindowMs
        settings.history.versions = historyVersions
        settings.tcpToken = tcpToken
        settings.maximumConnections = maxConnections
        settings.limits = CollectionLimits(collections: maxCollections, itemsPerCollection: maxItemsPerCollection)
        do {
            settings.publishers = try AccessList(parsing: publishers)
            settings.subscribers = try AccessList(parsing: subscribers)
        } catch {
            logger.critical("cannot start: \(error)")
            throw ExitCode(1)
        }
        var environment: [String: String] = [:]
        for name in ["NOTIFY_SOCKET", "WATCHDOG_USEC"] { environment[name] = self.environment(name) }
        let server = Server(
            configuration: settings, logger: logger, systemd: SystemdIntegration(environment: environment))
        do {
            let engine = ApplyEngine(historyLimits: settings.history, limits: settings.limits)
            var store: StateStore?
            if let stateDir {
                var options = StateStore.Options()
                options.sync = SyncPolicy(rawValue: sync) ?? .always
                options.syncIntervalMilliseconds = syncIntervalMs
                options.checkpointLogBytes = checkpointLogBytes
                let opened = try StateStore(directory: stateDir, options: options, logger: logger)
                try opened.recover(into: engine)
                store = opened
            }
            let stateDescription =
                stateDir.map { "\($0) (sync \(sync))" } ?? "in memory only: a restart loses everything"
            try server.run(engine: engine, store: store) {
                logger.info(
                    "ready", metadata: ["socket": "\(settings.socketPath ?? "-")", "state": "\(stateDescription)"])
            }
        } catch {
            logger.critical("cannot start: \(error)")
            throw ExitCode(1)
        }
        logger.info("stopped")
    }

    /// Every client is a file descriptor: take the hard limit, not the usual soft 1024.
    private func raiseFileDescriptorLimit() {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return }
        limit.rlim_cur = limit.rlim_max
        _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }

    private func environment(_ name: String) -> String? {
        guard let value = getenv(name) else { return nil }
        let text = String(cString: value)
        return text.isEmpty ? nil : text
    }
}

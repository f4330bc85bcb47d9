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

            SETTINGS (each also a key of the --config file; an option wins over the file):
            \(DaemonSettings.optionsHelp)
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

    /// The settings' options (`--max-line-bytes 4096`, …), which `DaemonSettings.all` describes
    /// and parses, and the help lists.
    @Argument(parsing: .allUnrecognized, help: ArgumentHelp(visibility: .hidden))
    var settingOptions: [String] = []

    func run() throws {
        if let verifyState {
            try Self.verify(stateDirectory: verifyState)
            return
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
        Self.warnIfDescriptorsAreShort(of: validated.settings.maxConnections, logger: logger)
        let configuration = ServerConfiguration(validated)
        let server = Server(
            configuration: configuration, logger: logger,
            systemd: SystemdIntegration(environment: ProcessInfo.processInfo.environment))
        server.reloadConfiguration = { reload(from: initial, logger: logger) }
        do {
            try serve(server, configuration: configuration, validated: validated, logger: logger)
        } catch {
            logger.critical("cannot start: \(error)")
            throw ExitCode(1)
        }
        logger.info("stopped")
    }

    /// `--verify-state`: prints what the directory holds, or the damaged file and offset.
    private static func verify(stateDirectory: String) throws {
        do {
            print(try StateStore.verify(directory: stateDirectory))
        } catch {
            print("\(stateDirectory): \(error)")
            throw ExitCode(1)
        }
    }

    /// The services in the order they depend on each other: the engine, how a batch becomes
    /// final (the state directory's log, or the backbone's shared log, or memory), then the
    /// server's loop, which runs until it is stopped.
    private func serve(
        _ server: Server, configuration: ServerConfiguration, validated: ValidatedSettings, logger: Logger
    ) throws {
        let engine = ApplyEngine(
            historyLimits: configuration.history, limits: configuration.limits,
            requestLimits: configuration.requestLimits, logger: logger)
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
    }

    /// Raises the descriptor limit, and warns when `max_connections` needs more than it allows.
    private static func warnIfDescriptorsAreShort(of maximumConnections: Int, logger: Logger) {
        // Listeners, the loop's own handles, the state directory and NATS take a few descriptors.
        let reserved = 64
        guard let descriptors = raiseFileDescriptorLimit(), maximumConnections > descriptors - reserved else { return }
        logger.warning(
            "max_connections is above what this process's descriptors allow",
            metadata: [
                "max_connections": "\(maximumConnections)", "descriptors": "\(descriptors)",
                "connections it can hold": "\(max(0, descriptors - reserved))",
            ])
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
        try settings.apply(options: settingOptions)
        return settings
    }

    /// SIGHUP: re-reads the file (options given on the command line still win) and returns
    /// what to apply, or nil when the file is unusable, which is logged and changes nothing.
    private func reload(from initial: DaemonSettings, logger: Logger) -> ServerConfiguration? {
        do {
            let fresh = try settings(configFile: config)
            let validated = try ValidatedSettings(fresh)
            let needRestart = DaemonSettings.changesNeedingRestart(from: initial, to: fresh)
            if !needRestart.isEmpty {
                logger.warning(
                    "changed settings take effect only after a restart", metadata: ["keys": "\(needRestart)"])
            }
            ReloadableLogHandler.level.withLock { $0 = validated.logLevel }
            return ServerConfiguration(validated)
        } catch {
            logger.error("reload failed, keeping the running configuration: \(error)")
            return nil
        }
    }

    /// Every client is a file descriptor: take the hard limit, not the usual soft 1024. Returns
    /// the descriptors the process may now hold (nil when the limit cannot be read).
    private static func raiseFileDescriptorLimit() -> Int? {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return nil }
        limit.rlim_cur = limit.rlim_max
        _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return nil }
        return limit.rlim_cur > UInt(Int.max) ? Int.max : Int(limit.rlim_cur)
    }
}

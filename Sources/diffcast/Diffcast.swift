import ArgumentParser
import CBuildInfo
import DiffcastClient
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// `diffcast`: every op of the daemon from a shell. Exit status: 0 ok, 1 the daemon answered
/// with an error, 2 usage, 3 no connection.
struct Diffcast: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "diffcast",
        abstract: "Talk to diffcastd: read, write and follow collections.",
        discussion: """
            Writes take the collection, then identifiers and data, with no JSON to write by \
            hand. One command per line:

              $ diffcast apply feed '{"sections":[{"id":"today","items":["t1"]}]}'
              $ diffcast append_items feed t2 --id t3 --data title=Done likes:=0
              $ diffcast update_items feed --id t3 --data msg="disk \\"sda\\" at 91%"
              $ diffcast sub feed --state feed.mirror

            After --data come key=value words (a string) and key:=JSON words (any JSON value), \
            up to the next option. A JSON object argument (or - for standard input) gives the \
            request's arguments directly. 'diffcast OP --help' shows what OP takes.

            Exit status: 0 ok, 1 an error response (code and message on stderr), 2 usage, \
            3 cannot connect.
            """,
        version: "diffcast \(String(cString: diffcast_version())) (commit \(String(cString: diffcast_build_commit())))",
        subcommands: [
            Ping.self, List.self, Stats.self, Get.self, Subscribe.self, Apply.self,
            AppendSections.self, InsertSections.self, DeleteSections.self, ReloadSections.self, MoveSection.self,
            UpdateSections.self, AppendItems.self, InsertItems.self, DeleteItems.self, ReloadItems.self,
            ReconfigureItems.self, MoveItem.self, UpdateItems.self, DeleteAll.self, Drop.self, Batch.self, Token.self,
        ]
    )
}

@main
enum Main {
    static func main() async {
        let command: any ParsableCommand
        do {
            command = try Diffcast.parseAsRoot()
        } catch {
            usageError(error, Diffcast.fullMessage(for: error))
        }
        do {
            if var asynchronous = command as? AsyncParsableCommand {
                try await asynchronous.run()
            } else {
                var synchronous = command
                try synchronous.run()
            }
        } catch let exit as ExitCode {
            Diffcast.exit(withError: exit)
        } catch {
            // What a command found wrong once its arguments were parsed (a ValidationError).
            usageError(
                error, "Error: \(Diffcast.message(for: error))\nUsage: \(Diffcast.usageString(for: type(of: command)))")
        }
    }

    /// Ends a request for help or the version as ArgumentParser does; any other error is a usage
    /// error: says `message` and exits with status 2.
    private static func usageError(_ error: any Error, _ message: String) -> Never {
        guard Diffcast.exitCode(for: error) != .success else { Diffcast.exit(withError: error) }
        FileHandle.standardError.write(Data((message + "\n").utf8))
        Diffcast.exit(withError: ExitCode(2))
    }
}

/// How to reach the daemon, and how to print; shared by every command.
struct ConnectionOptions: ParsableArguments {
    @Option(
        name: .shortAndLong,
        help: ArgumentHelp(
            "The daemon's Unix socket.",
            discussion:
                "Default: $DIFFCAST_SOCKET, else /run/diffcast/diffcast.sock when it exists, else /tmp/diffcast.sock."
        ))
    var socket: String?

    @Option(help: "HOST:PORT of the daemon's TCP listener, instead of the socket (or $DIFFCAST_TCP).")
    var tcp: String?

    @Option(help: "The TCP listener's token (default: $DIFFCAST_TOKEN).")
    var token: String?

    @Flag(help: "Print the daemon's JSON lines as received, one per line.")
    var json = false

    func endpoint() throws -> Endpoint {
        let environment = ProcessInfo.processInfo.environment
        if let text = tcp ?? (socket == nil ? environment["DIFFCAST_TCP"] : nil) {
            guard let endpoint = Endpoint(tcp: text) else {
                throw ValidationError("--tcp wants HOST:PORT, not '\(text)'")
            }
            return endpoint
        }
        if let path = socket ?? environment["DIFFCAST_SOCKET"] { return .unix(path: path) }
        let systemSocket = "/run/diffcast/diffcast.sock"
        return .unix(
            path: FileManager.default.fileExists(atPath: systemSocket) ? systemSocket : Endpoint.defaultSocketPath)
    }

    /// Where `endpoint()` found the address, when the user may have forgotten: an environment
    /// variable, or the default.
    private var endpointOrigin: String {
        let environment = ProcessInfo.processInfo.environment
        if tcp != nil || socket != nil { return "" }
        if environment["DIFFCAST_TCP"] != nil { return " (from $DIFFCAST_TCP)" }
        if environment["DIFFCAST_SOCKET"] != nil { return " (from $DIFFCAST_SOCKET)" }
        return " (the default socket)"
    }

    /// `--token`, else `$DIFFCAST_TOKEN`.
    var resolvedToken: String? { token ?? ProcessInfo.processInfo.environment["DIFFCAST_TOKEN"] }

    /// Connects, runs `body`, and turns client errors into the command's exit status.
    func session<Result>(_ body: (DaemonConnection) async throws -> Result) async throws -> Result {
        do {
            let connection = try await DaemonConnection.connect(
                to: try endpoint(), token: resolvedToken)
            defer { connection.close() }
            return try await body(connection)
        } catch let error as ClientError {
            throw fail(error)
        }
    }

    /// Says what went wrong on stderr (for a failed connection, also where its address came
    /// from) and gives the exit status for it.
    func fail(_ error: ClientError) -> ExitCode {
        switch error {
        case .response:
            notice("\(error)")
            return ExitCode(1)
        case .cannotConnect(let endpoint, let cause):
            notice("cannot connect to \(endpoint)\(endpointOrigin): \(cause)")
            return ExitCode(3)
        case .disconnected, .protocolViolation:
            notice("\(error)")
            return ExitCode(3)
        }
    }

    /// Prints a response: as received with `--json`, else what `human` makes of it.
    func show(_ response: JSONValue, human: (JSONValue) -> String) {
        print(json ? response.canonicalText : human(response))
    }
}

struct Ping: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Check that the daemon answers.")
    @OptionGroup var options: ConnectionOptions

    func run() async throws {
        try await options.session { connection in
            options.show(try await connection.call(["op": "ping"])) { _ in "pong" }
        }
    }
}

struct List: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List the collections.")
    @OptionGroup var options: ConnectionOptions

    func run() async throws {
        try await options.session { connection in
            options.show(try await connection.call(["op": "list"])) { response in
                guard case .array(let collections) = response["collections"], !collections.isEmpty else {
                    return "(no collections)"
                }
                let keys = ["name", "version", "sections", "items", "subscribers"]
                let rows = [keys] + collections.map { entry in keys.map { entry[$0].map(Text.plain) ?? "" } }
                return Text.table(rows)
            }
        }
    }
}

struct Stats: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show the daemon's counters.")
    @OptionGroup var options: ConnectionOptions

    func run() async throws {
        try await options.session { connection in
            options.show(try await connection.call(["op": "stats"])) { response in
                guard case .object(let members) = response else { return response.canonicalText }
                return Text.table(
                    members.filter { $0.key != "ok" && $0.key != "op" }.map { [$0.key, Text.plain($0.value)] })
            }
        }
    }
}

struct Get: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show a collection: version, epoch, digest, sections, items and data.")
    @OptionGroup var options: ConnectionOptions
    @Argument(help: "The collection.") var collection: String
    @OptionGroup var windowOptions: WindowOptions

    func run() async throws {
        var members: [JSONValue.Member] = [.init("op", "get"), .init("collection", .string(collection))]
        if let window = try windowOptions.window() { members.append(.init("window", window.jsonValue)) }
        let request = JSONValue.object(members)
        try await options.session { connection in
            let response = try await connection.call(request)
            options.show(response) { response in
                let style = Style.forStandardOutput
                var lines = [
                    style.bold(collection)
                        + "  version \(Text.plain(response["version"] ?? .null))  epoch \(Text.plain(response["epoch"] ?? .null))  digest \(Text.plain(response["digest"] ?? .null))"
                ]
                if let window = response["window"] {
                    lines[0] += "  window \(window.canonicalText)"
                }
                do {
                    lines += Text.outline(try EventDecoder.outline(response["sections"]), style: style)
                } catch {
                    lines.append("(sections unreadable: \(error))")
                }
                return lines.joined(separator: "\n")
            }
        }
    }
}

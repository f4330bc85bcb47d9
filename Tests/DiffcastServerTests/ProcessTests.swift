import DiffcastTestDaemon
import DiffcastWire
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The daemon as an operator and a shell user meet it: its socket file, signals, and netcat.
@Suite(.serialized) struct ProcessTests {
    @Test func netcatSubscribesAndReceivesChangesets() throws {
        let daemon = try Daemon()
        let netcat = try NetcatSession(socketPath: daemon.socketPath)
        netcat.send("subscribe feed\n")
        let reader = netcat.reader
        var lines = try (0..<2).map { _ in try reader.next() }
        #expect(lines.contains { $0["event"] == .string("snapshot") })
        let publisher = try Client(path: daemon.socketPath)
        #expect(try publisher.request(#"append_sections feed {"sections":[{"id":"s","items":["a"]}]}"#).isOK)
        lines = [try reader.next()]
        #expect(lines[0]["event"] == .string("changeset"))
        #expect(lines[0]["items"]?["inserted"]?.array.count == 1)
        netcat.send("ping\n")
        #expect(try reader.next()["op"] == .string("ping"))
    }

    @Test func sigtermRemovesTheSocketAndExitsCleanly() throws {
        let daemon = try Daemon()
        #expect(FileManager.default.fileExists(atPath: daemon.socketPath))
        let client = try Client(path: daemon.socketPath)
        _ = try client.request(#"append_sections s {"sections":[{"id":"a"}]}"#)
        #expect(daemon.stop(signal: SIGTERM) == 0)
        #expect(!FileManager.default.fileExists(atPath: daemon.socketPath))
    }

    @Test func aStaleSocketFileIsReplaced() throws {
        let first = try Daemon()
        #expect(first.stop(signal: SIGKILL) != 0)
        #expect(FileManager.default.fileExists(atPath: first.socketPath))
        let second = try Daemon(socketPath: first.socketPath)
        #expect(try Client(path: second.socketPath).request("ping").isOK)
    }

    @Test func aLiveDaemonOnTheSameSocketIsRefused() throws {
        let first = try Daemon()
        let second = try Daemon(socketPath: first.socketPath, waitForSocket: false)
        #expect(second.exitStatus() > 0)
        #expect(second.log().contains("already serving"))
        #expect(try Client(path: first.socketPath).request("ping").isOK)
    }

    @Test(.enabled(if: FileManager.default.fileExists(atPath: "/usr/bin/prlimit")))
    func runningOutOfDescriptorsDoesNotSpinTheLoop() throws {
        let daemon = try Daemon(launcher: { _, binary in ["/usr/bin/prlimit", "--nofile=64:64", binary] })
        let clients = try (0..<150).map { _ in try Client(path: daemon.socketPath) }
        let cpuTicks = { () throws -> Int in
            let fields = try String(contentsOfFile: "/proc/\(daemon.pid)/stat", encoding: .utf8).split(separator: " ")
            return (Int(fields[13]) ?? 0) + (Int(fields[14]) ?? 0)
        }
        let before = try cpuTicks()
        usleep(1_000_000)
        // Clock ticks (1/100 s) of CPU in one second past the limit: an accept loop would use ~100.
        #expect(try cpuTicks() - before < 20)
        for client in clients { client.close() }
        try waitUntil("the daemon serves again") {
            (try? Client(path: daemon.socketPath).request("ping").isOK) == true
        }
    }

    @Test func aSocketPathThatIsTooLongIsRefused() throws {
        let long = "/tmp/" + String(repeating: "d", count: 120) + ".sock"
        let daemon = try Daemon(socketPath: long, waitForSocket: false)
        #expect(daemon.exitStatus() > 0)
        #expect(daemon.log().contains("longer than"))
    }
}

/// `nc -U` on the daemon's socket, as a shell user meets it, or as another uid (through
/// `setpriv`): its input, and a reader of its output. The session kills nc when it goes, with
/// SIGKILL: the nc the test runner starts ignores SIGTERM.
final class NetcatSession {
    private let process = Process()
    private let input = Pipe()
    let reader: LineReader

    /// `options` go to nc before the socket's path (`-N`: shut the socket down for writing
    /// once the input is closed). As another user, nc runs in the group `group` (by default the
    /// group whose id is the user's).
    init(socketPath: String, asUser uid: UInt32? = nil, group: UInt32? = nil, options: [String] = []) throws {
        if let uid {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            process.arguments =
                ["--reuid=\(uid)", "--regid=\(group ?? uid)", "--clear-groups", "nc", "-U"] + options + [socketPath]
        } else {
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            process.arguments =
                ["-c", "command -v nc >/dev/null || exit 127; exec nc -U \"$@\"", "nc"] + options + [socketPath]
        }
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        reader = LineReader(output.fileHandleForReading)
        try process.run()
    }

    func send(_ text: String) {
        input.fileHandleForWriting.write(Data(text.utf8))
    }

    func closeInput() throws {
        try input.fileHandleForWriting.close()
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        _ = process.exitStatus()
    }
}

/// Reads JSON lines from a pipe with a deadline.
final class LineReader {
    private let handle: FileHandle
    private var buffer: [UInt8] = []

    init(_ handle: FileHandle) {
        self.handle = handle
    }

    func next(timeout: Double = 10) throws -> JSONValue {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = Array(buffer[..<newline])
                buffer.removeFirst(newline + 1)
                return try JSONParser.parse(line)
            }
            guard Date() < deadline else { throw HarnessError.timeout("a line from nc") }
            var poller = pollfd(fd: handle.fileDescriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 100) > 0 else { continue }
            let chunk = handle.availableData
            if chunk.isEmpty { throw HarnessError.failed("nc closed its output") }
            buffer.append(contentsOf: chunk)
        }
    }
}

import DiffcastTestDaemon
import DiffcastWire
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The daemon as systemd runs it, checked without systemd as PID 1: the units pass
/// `systemd-analyze verify`, notifications arrive on a real datagram socket, and socket
/// activation works through `systemd-socket-activate`.
@Suite(.serialized) struct SystemdTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    private func run(_ executable: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        return (process.exitStatus() ?? ProcessExit.killedForHanging, output)
    }

    @Test(.enabled(if: FileManager.default.fileExists(atPath: "/usr/bin/systemd-analyze")))
    func theUnitsPassSystemdAnalyzeVerify() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("dc-units-\(getpid())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        for name in ["diffcast.service", "diffcast.socket"] {
            let text = try String(contentsOf: Self.root.appendingPathComponent("systemd/\(name)"), encoding: .utf8)
                .replacingOccurrences(of: "/usr/local/bin/diffcastd", with: Daemon.binary.path)
            try text.write(to: directory.appendingPathComponent(name), atomically: true, encoding: .utf8)
        }
        let result = try run(
            "/usr/bin/systemd-analyze",
            [
                "verify", directory.appendingPathComponent("diffcast.socket").path,
                directory.appendingPathComponent("diffcast.service").path,
            ])
        // An unknown key is only a warning with exit 0: any output at all is a failure.
        #expect(result.status == 0)
        #expect(result.output.isEmpty, "\(result.output)")
    }

    @Test func readinessStatusWatchdogAndStoppingAreNotified() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("dc-notify-\(getpid()).sock").path
        unlink(path)
        let listener = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        defer {
            close(listener)
            unlink(path)
        }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: path.utf8.prefix($0.count - 1)) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        #expect(bound == 0)
        let daemon = try Daemon(environment: ["NOTIFY_SOCKET": path, "WATCHDOG_USEC": "200000"])
        func receive() -> String? {
            var poller = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 5000) > 0 else { return nil }
            var buffer = [UInt8](repeating: 0, count: 4096)
            let count = recv(listener, &buffer, buffer.count, 0)
            return count > 0 ? String(decoding: buffer[..<count], as: UTF8.self) : nil
        }
        var messages: [String] = []
        while !messages.contains(where: { $0.contains("WATCHDOG=1") }), let message = receive() {
            messages.append(message)
        }
        #expect(messages.first?.contains("READY=1") == true, "\(messages)")
        #expect(messages.first?.contains("STATUS=serving") == true, "\(messages)")
        #expect(messages.contains { $0.contains("WATCHDOG=1") }, "\(messages)")
        #expect(daemon.stop() == 0)
        var stopping = false
        while !stopping, let message = receive() {
            if message.contains("STOPPING=1") { stopping = true }
        }
        #expect(stopping)
    }

    @Test func checkConfigAcceptsTheShippedFileAndNamesABadKey() throws {
        let shipped = Self.root.appendingPathComponent("config/diffcastd.yaml").path
        let good = try run(Daemon.binary.path, ["--check-config", shipped])
        #expect(good.status == 0 && good.output.contains("ok"), "\(good.output)")
        let bad = FileManager.default.temporaryDirectory.appendingPathComponent("dc-bad-\(getpid()).yaml")
        defer { try? FileManager.default.removeItem(at: bad) }
        try "max_items: 5\n".write(to: bad, atomically: true, encoding: .utf8)
        let result = try run(Daemon.binary.path, ["--check-config", bad.path])
        #expect(result.status != 0 && result.output.contains("unknown key 'max_items'"), "\(result.output)")
    }

    @Test func sighupReloadsALimitWhileASubscriberStaysConnected() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("dc-reload-\(getpid()).yaml")
        defer { try? FileManager.default.removeItem(at: file) }
        try "max_collections: 100\n".write(to: file, atomically: true, encoding: .utf8)
        let daemon = try Daemon(arguments: ["--config", file.path])
        let subscriber = try Client(path: daemon.socketPath)
        _ = try subscriber.request("subscribe kept")
        _ = try subscriber.event()
        let client = try Client(path: daemon.socketPath)
        #expect(try client.request(#"apply other {"sections":[]}"#).isOK)
        try "max_collections: 2\n".write(to: file, atomically: true, encoding: .utf8)
        kill(daemon.pid, SIGHUP)
        var attempt = 0
        try waitUntil("the new limit applies") {
            // A new name each time: one created before the reload exists afterwards.
            attempt += 1
            let response = try client.request(#"apply new\#(attempt) {"sections":[]}"#)
            return response["error"]?["message"]?.string?.contains("max_collections (2)") == true
        }
        #expect(try client.request(#"append_sections kept {"sections":[{"id":"s"}]}"#).isOK)
        #expect(try subscriber.event()["event"] == .string("changeset"), "the subscriber is still served")
        #expect(daemon.stop() == 0)
    }

    @Test(.enabled(if: FileManager.default.fileExists(atPath: "/usr/bin/systemd-socket-activate")))
    func socketActivationServesTheInheritedSocket() throws {
        let daemon = try Daemon(launcher: { path, binary in
            ["/usr/bin/systemd-socket-activate", "-l", path, binary]
        })
        let client = try Client(path: daemon.socketPath)
        #expect(try client.request("ping").isOK)
        #expect(try client.request(#"append_sections a {"sections":[{"id":"s"}]}"#)["version"]?.int == 1)
        #expect(daemon.stop() == 0)
        // The socket belongs to whoever activated us: the daemon leaves its path alone.
        #expect(FileManager.default.fileExists(atPath: daemon.socketPath))
    }

    /// Under journald ($JOURNAL_STREAM naming stderr) every line starts with its syslog
    /// priority, so `journalctl -p warning` shows warnings and errors and nothing else; a
    /// JOURNAL_STREAM that names another file changes nothing.
    @Test(arguments: [true, false])
    func linesCarryTheirPriorityForJournald(announced: Bool) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "dc-jr-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let logPath = directory.appendingPathComponent("stderr").path
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        var status = stat()
        #expect(stat(logPath, &status) == 0)
        let socketPath = directory.appendingPathComponent("s.sock").path
        let process = Process()
        process.executableURL = Daemon.binary
        process.arguments = ["--socket", socketPath, "--log-level", "info"]
        process.environment = ProcessInfo.processInfo.environment.merging([
            "JOURNAL_STREAM": announced ? "\(status.st_dev):\(status.st_ino)" : "\(status.st_dev):1"
        ]) { $1 }
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        try process.run()
        try waitUntil("the daemon listens") { (try? Client(path: socketPath)).map { $0.close() } != nil }
        kill(process.processIdentifier, SIGTERM)
        #expect(process.exitStatus() == 0)
        let lines = (try String(contentsOfFile: logPath, encoding: .utf8)).split(separator: "\n").map(String.init)
        if announced {
            #expect(lines.contains { $0.hasPrefix("<6>ready ") }, "\(lines)")
            #expect(lines.allSatisfy { $0.hasPrefix("<") }, "\(lines)")
        } else {
            #expect(lines.contains { $0.contains(" info diffcastd: ready ") }, "\(lines)")
            #expect(!lines.contains { $0.hasPrefix("<") }, "\(lines)")
        }
    }
}

import DiffcastCore
import DiffcastTestDaemon
import DiffcastWire
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// What a daemon refuses at start, as an operator meets it: what is not its own is left alone,
/// and each refusal says what to do.
@Suite(.serialized) struct StartupRefusalTests {
    static func attempts() -> Int {
        Int(ProcessInfo.processInfo.environment["DIFFCAST_LOCK_ATTEMPTS"] ?? "") ?? 20
    }

    /// A second daemon on a state directory in use would checkpoint and remove the first one's
    /// live log, losing acknowledged writes at the first one's next crash. It is refused, naming
    /// the holder, however often it is tried while the first one takes writes; the first one's
    /// acknowledged writes then survive its kill -9.
    @Test func aSecondDaemonOnAStateDirectoryInUseIsRefusedAndLosesNothing() throws {
        let stateDirectory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "dc-lock-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: stateDirectory) }
        let socketPath = stateDirectory.path + ".sock"
        let arguments = ["--state-dir", stateDirectory.path, "--checkpoint-log-bytes", "8192"]
        let first = try Daemon(arguments: arguments, socketPath: socketPath)
        #expect(try Client(path: socketPath).request(#"append_sections lock {"sections":[{"id":"s"}]}"#).isOK)
        let acknowledged = Locked<[String]>([])
        let stopping = Atomic<Bool>(false)
        let writer = Thread {
            guard let client = try? Client(path: socketPath) else { return }
            var index = 0
            while !stopping.load(ordering: .relaxed) {
                let id = "i\(index)"
                guard (try? client.request(#"append_items lock {"items":["\#(id)"]}"#))?.isOK == true else { return }
                acknowledged.withLock { $0.append(id) }
                index += 1
            }
        }
        writer.start()
        for attempt in 0..<Self.attempts() {
            let second = try Daemon(arguments: arguments, waitForSocket: false)
            // A second daemon that is not refused runs: it is stopped, and that is the failure.
            let deadline = Date().addingTimeInterval(10)
            while second.process.isRunning && Date() < deadline { usleep(10_000) }
            let refused = !second.process.isRunning && second.process.terminationStatus != 0
            _ = second.stop(signal: SIGKILL)
            #expect(refused, "attempt \(attempt): the second daemon ran")
            guard refused else { break }
            #expect(
                second.log().contains("in use by another daemon (pid \(first.pid))"),
                "attempt \(attempt): \(second.log().suffix(300))")
            #expect(!FileManager.default.fileExists(atPath: second.socketPath), "attempt \(attempt)")
        }
        stopping.store(true, ordering: .relaxed)
        while writer.isExecuting { usleep(10_000) }
        let written = acknowledged.withLock { $0 }
        #expect(written.count > Self.attempts(), "too few writes under the attempts: \(written.count)")
        _ = first.stop(signal: SIGKILL)
        let restarted = try Daemon(arguments: arguments, socketPath: socketPath)
        let state = try Client(path: socketPath).request("get lock")
        let held = try EventDecoder.outline(state["sections"]).flatMap { $0.items.map(\.id.text) }
        #expect(held == written)
        _ = restarted.stop()
    }

    /// `--verify-state` reads a directory in use and leaves its daemon serving.
    @Test func verifyingAStateDirectoryInUseHarmsNothing() throws {
        let stateDirectory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "dc-verify-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: stateDirectory) }
        let daemon = try Daemon(arguments: ["--state-dir", stateDirectory.path])
        let client = try Client(path: daemon.socketPath)
        #expect(try client.request(#"append_sections v {"sections":[{"id":"s","items":["a","b"]}]}"#).isOK)
        let verify = Process()
        verify.executableURL = Daemon.binary
        verify.arguments = ["--verify-state", stateDirectory.path]
        let output = Pipe()
        verify.standardOutput = output
        try verify.run()
        let summary = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(verify.exitStatus() == 0)
        #expect(summary.contains("1 collections"), "\(summary)")
        #expect(try client.request(#"append_items v {"items":["c"]}"#)["version"]?.int == 2)
        _ = daemon.stop()
    }

    /// Only a socket that nobody answers is stale: a regular file at the socket's path is never
    /// removed.
    @Test func aFileThatIsNotASocketIsLeftAlone() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "dc-file-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let precious = directory.appendingPathComponent("precious.txt").path
        try "keep me\n".write(toFile: precious, atomically: false, encoding: .utf8)
        let daemon = try Daemon(socketPath: precious, waitForSocket: false)
        #expect(daemon.exitStatus() > 0)
        #expect(daemon.log().contains("exists and is not a socket"), "\(daemon.log().suffix(300))")
        #expect(try String(contentsOfFile: precious, encoding: .utf8) == "keep me\n")
    }

    @Test func aSocketInAMissingDirectorySaysSo() throws {
        let daemon = try Daemon(
            socketPath: "/tmp/dc-missing-\(UUID().uuidString.prefix(8))/x.sock", waitForSocket: false)
        #expect(daemon.exitStatus() > 0)
        #expect(daemon.log().contains("does not exist"), "\(daemon.log().suffix(300))")
    }

    /// A start that fails after binding the socket (here: the metrics port is taken) leaves no
    /// socket file behind.
    @Test func aStartThatFailsAfterBindingLeavesNoSocketFile() throws {
        let taken = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(taken) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(taken, $0, length) == 0 && listen(taken, 1) == 0 && getsockname(taken, $0, &length) == 0
            }
        }
        try #require(bound)
        let port = Int(UInt16(bigEndian: address.sin_port))
        let daemon = try Daemon(arguments: ["--metrics", "127.0.0.1:\(port)"], waitForSocket: false)
        #expect(daemon.exitStatus() > 0)
        #expect(daemon.log().contains("address already in use"), "\(daemon.log().suffix(300))")
        #expect(!FileManager.default.fileExists(atPath: daemon.socketPath))
    }

    @Test func aHostNameWhereAnIPAddressBelongsIsExplained() throws {
        let daemon = try Daemon(arguments: ["--tcp", "localhost:17999", "--tcp-token", "t"], waitForSocket: false)
        #expect(daemon.exitStatus() > 0)
        #expect(daemon.log().contains("host names are not resolved"), "\(daemon.log().suffix(300))")
    }

    /// `--verify-state` on a directory that holds no state says so and fails.
    @Test func verifyingADirectoryWithoutStateFails() throws {
        let verify = Process()
        verify.executableURL = Daemon.binary
        verify.arguments = ["--verify-state", "/etc"]
        let errors = Pipe()
        verify.standardError = errors
        verify.standardOutput = errors
        try verify.run()
        let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect((verify.exitStatus() ?? 0) != 0)
        #expect(message.contains("holds no Diffcast state"), "\(message)")
    }
}

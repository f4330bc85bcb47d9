import DiffcastCore
import DiffcastWire
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

public enum HarnessError: Error, CustomStringConvertible {
    case timeout(String)
    case failed(String)

    public var description: String {
        switch self {
        case .timeout(let what): "timed out: \(what)"
        case .failed(let what): what
        }
    }
}

/// The real `diffcastd` binary, started on a socket of its own in a fresh temporary folder.
public final class Daemon: @unchecked Sendable {
    public static var binary: URL {
        if let path = ProcessInfo.processInfo.environment["DIFFCASTD"] { return URL(fileURLWithPath: path) }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        return root.appendingPathComponent(".build/debug/diffcastd")
    }

    public let directory: URL
    public let socketPath: String
    public let process = Process()
    /// The daemon's stderr goes to a file (a pipe nobody reads could fill and block it).
    public let logFile: URL

    /// Starts the daemon; `launcher` runs it through another program (e.g. systemd-socket-activate),
    /// given the socket path and the daemon's path; `environment` adds variables.
    public init(
        arguments: [String] = [], socketPath: String? = nil, waitForSocket: Bool = true,
        launcher: ((String, String) -> [String])? = nil, environment: [String: String] = [:]
    ) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("dc-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        self.socketPath = socketPath ?? directory.appendingPathComponent("d.sock").path
        let daemonArguments = ["--socket", self.socketPath, "--log-level", "info"] + arguments
        if let launcher {
            let command = launcher(self.socketPath, Self.binary.path)
            process.executableURL = URL(fileURLWithPath: command[0])
            process.arguments = Array(command.dropFirst()) + daemonArguments
        } else {
            process.executableURL = Self.binary
            process.arguments = daemonArguments
        }
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        logFile = directory.appendingPathComponent("daemon.log")
        guard FileManager.default.createFile(atPath: logFile.path, contents: nil) else {
            throw HarnessError.failed("cannot create \(logFile.path)")
        }
        process.standardError = try FileHandle(forWritingTo: logFile)
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        if waitForSocket {
            try waitUntil("the daemon listens on \(self.socketPath)") {
                (try? Client(path: self.socketPath)).map { $0.close() } != nil
            }
        }
    }

    public var pid: Int32 { process.processIdentifier }

    /// Sends `signal` and returns the exit status (`Process.terminationStatus`'s meaning). A
    /// daemon still running after `ProcessExit.patience` is killed, and the status is then
    /// `ProcessExit.killedForHanging` or SIGKILL's number: either way a failure to the test.
    public func stop(signal: Int32 = SIGTERM) -> Int32 {
        if process.isRunning { kill(process.processIdentifier, signal) }
        return process.exitStatus() ?? ProcessExit.killedForHanging
    }

    /// The daemon's exit status once it ends by itself (a refused start), as `stop`.
    public func exitStatus() -> Int32 {
        process.exitStatus() ?? ProcessExit.killedForHanging
    }

    /// What the daemon logged so far.
    public func log() -> String {
        (try? String(contentsOf: logFile, encoding: .utf8)) ?? ""
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            _ = process.exitStatus()
        }
        try? FileManager.default.removeItem(at: directory)
    }
}

/// Waiting for a child process without `Process.waitUntilExit`. That call waits for Foundation
/// to notice the exit (a socket the child held closes), and once it did not: a daemon that
/// died during a failing test stayed a zombie, never reaped, and the suite hung instead of
/// reporting the failure. Here the wait is bounded, and a child Foundation has not noticed
/// after a grace period is reaped with `waitpid` directly.
public enum ProcessExit {
    /// How long a child may take to exit before it is killed.
    public static let patience: Double = 60
    /// The status `Daemon.stop` reports for a daemon that had to be killed: no exit code.
    public static let killedForHanging: Int32 = -1
}

extension Process {
    /// Waits for the process to end: its status (the exit code, or the number of the signal that
    /// ended it, as `terminationStatus`). One still running after `patience` seconds is killed
    /// and nil returned; nil too if it cannot be reaped after that.
    public func exitStatus(patience: Double = ProcessExit.patience) -> Int32? {
        let pid = processIdentifier
        let started = Date()
        var killed = false
        while true {
            if !isRunning { return terminationStatus }
            // Foundation normally notices within milliseconds; past a second, reap it here.
            if Date().timeIntervalSince(started) > 1 {
                var status: Int32 = 0
                let reaped = waitpid(pid, &status, WNOHANG)
                if reaped == pid {
                    let signal = status & 0x7f
                    return killed ? nil : (signal == 0 ? (status >> 8) & 0xff : signal)
                }
                // ECHILD: Foundation reaped it meanwhile; isRunning turns false at once.
            }
            if !killed, Date().timeIntervalSince(started) > patience {
                kill(pid, SIGKILL)
                killed = true
            }
            if Date().timeIntervalSince(started) > patience + 10 { return nil }
            usleep(10_000)
        }
    }
}

/// A connected TCP socket to 127.0.0.1:port; the caller closes it.
public func connectTCP(port: Int) throws -> Int32 {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    guard connected == 0 else {
        close(descriptor)
        throw HarnessError.failed("cannot connect to 127.0.0.1:\(port)")
    }
    return descriptor
}

public func waitUntil(_ what: String, timeout: Double = 10, _ condition: () throws -> Bool) throws {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if try condition() { return }
        usleep(20_000)
    }
    throw HarnessError.timeout(what)
}

/// A blocking line client over a real Unix socket, as a script would use the daemon. A test may
/// hand it to one sending thread while another reads.
public final class Client: @unchecked Sendable {
    public private(set) var descriptor: Int32
    /// Bytes received and not yet returned: from `bufferStart` on (lines are taken from the
    /// front by moving it, so a burst of a million lines costs no copy per line).
    private var buffer: [UInt8] = []
    private var bufferStart = 0
    /// Events read while waiting for a response.
    public var events: [JSONValue] = []

    public init(path: String, receiveBufferBytes: Int32? = nil) throws {
        descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw HarnessError.failed("socket: \(errno)") }
        if var size = receiveBufferBytes {
            setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: path.utf8.prefix(raw.count - 1))
        }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard result == 0 else {
            let error = errno
            // Through `close()`, which forgets the number: `deinit` runs for an object whose init
            // throws, and a second close could hit a descriptor another test has reused (a
            // concurrent storage test once lost its log file that way).
            close()
            throw HarnessError.failed("connect \(path): \(error)")
        }
    }

    /// Closes once: a second close could hit a descriptor number another test has reused.
    public func close() {
        if descriptor >= 0 { Glibc.close(descriptor) }
        descriptor = -1
    }

    deinit { close() }

    public func send(_ line: String) throws {
        try sendRaw(Array((line + "\n").utf8))
    }

    public func sendRaw(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes {
                Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            // SIGCHLD from exiting child processes may interrupt the call.
            if sent < 0 && errno == EINTR { continue }
            guard sent > 0 else { throw HarnessError.failed("send: \(errno)") }
            offset += sent
        }
    }

    /// The next line as JSON, or nil on end of stream.
    public func readLine(timeout: Double = 10) throws -> JSONValue? {
        guard let line = try readLineBytes(timeout: timeout) else { return nil }
        return try JSONParser.parse(line)
    }

    /// The next line's bytes without its newline, or nil on end of stream.
    public func readLineBytes(timeout: Double = 10) throws -> [UInt8]? {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let newline = buffer[bufferStart...].firstIndex(of: UInt8(ascii: "\n")) {
                let line = Array(buffer[bufferStart..<newline])
                bufferStart = newline + 1
                return line
            }
            // Only a partial line is left: it moves to the front before more is read.
            buffer.removeFirst(bufferStart)
            bufferStart = 0
            guard let chunk = try receive(before: deadline, waitingFor: "a line from the daemon") else { return nil }
            buffer.append(contentsOf: chunk)
        }
    }

    /// The bytes received next, whole lines or not (those already read first), or nil on end of
    /// stream: for a test that checks a flood of answers in bulk rather than line by line.
    public func readBytes(timeout: Double = 10) throws -> [UInt8]? {
        if bufferStart < buffer.count {
            defer { (buffer, bufferStart) = ([], 0) }
            return Array(buffer[bufferStart...])
        }
        return try receive(before: Date().addingTimeInterval(timeout), waitingFor: "bytes from the daemon")
    }

    /// What one `recv` gives once the socket is readable (nil at end of stream); throws when
    /// nothing arrives before `deadline`.
    private func receive(before deadline: Date, waitingFor what: String) throws -> [UInt8]? {
        while true {
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { throw HarnessError.timeout(what) }
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, Int32(left * 1000)) > 0 else { continue }
            var chunk = [UInt8](repeating: 0, count: 1 << 16)
            let count = recv(descriptor, &chunk, chunk.count, 0)
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { return nil }
            chunk.removeLast(chunk.count - count)
            return chunk
        }
    }

    /// Sends a request and returns its response, keeping events that arrive before it.
    public func request(_ line: String) throws -> JSONValue {
        try send(line)
        return try response()
    }

    public func response() throws -> JSONValue {
        while let line = try readLine() {
            if line["ok"] != nil { return line }
            events.append(line)
        }
        throw HarnessError.failed("connection closed before a response")
    }

    public func event() throws -> JSONValue {
        if !events.isEmpty { return events.removeFirst() }
        guard let line = try readLine() else { throw HarnessError.failed("connection closed before an event") }
        guard line["event"] != nil else { throw HarnessError.failed("expected an event, got \(line.canonicalText)") }
        return line
    }
}

extension JSONValue {
    public var int: Int? {
        if case .number(let text) = self { return Int(text) }
        return nil
    }

    public var string: String? {
        if case .string(let text) = self { return text }
        return nil
    }

    public var array: [JSONValue] {
        if case .array(let elements) = self { return elements }
        return []
    }

    public var isOK: Bool { self["ok"] == .bool(true) }
}

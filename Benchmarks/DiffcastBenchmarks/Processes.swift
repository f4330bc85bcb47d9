import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A server process the benchmarks start and stop: the release `diffcastd`, or `redis-server`.
/// Shared with a memory-sampling thread, which only reads its pid.
final class ServerProcess: @unchecked Sendable {
    let process = Process()
    let socketPath: String

    init(executable: String, arguments: [String], socketPath: String) throws {
        self.socketPath = socketPath
        unlink(socketPath)
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        // DIFFCAST_BENCH_SERVER_LOG names a file to take the servers' standard error.
        process.standardError =
            ProcessInfo.processInfo.environment["DIFFCAST_BENCH_SERVER_LOG"].flatMap {
                _ = FileManager.default.createFile(atPath: $0, contents: nil)
                return FileHandle(forWritingAtPath: $0)
            } ?? FileHandle.nullDevice
        try process.run()
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            if let socket = try? UnixSocket(path: socketPath) {
                socket.close()
                return
            }
            usleep(20_000)
        }
        throw BenchmarkError("\(executable) did not listen on \(socketPath)")
    }

    /// The release `diffcastd` beside the benchmark binary, or `binary` (another build to compare).
    static func diffcastd(socketPath: String, arguments: [String] = [], binary: String? = nil) throws -> ServerProcess {
        let binary =
            binary
            ?? URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
            .appendingPathComponent("diffcastd").path
        return try ServerProcess(
            executable: binary, arguments: ["--socket", socketPath, "--log-level", "warning"] + arguments,
            socketPath: socketPath)
    }

    /// Redis with `ioThreads` threads (Redis 6's I/O threads, which write replies in parallel
    /// when enough clients wait for them).
    static func redis(socketPath: String, ioThreads: Int = 1) throws -> ServerProcess {
        try ServerProcess(
            executable: "/usr/bin/redis-server",
            arguments: [
                "--port", "0", "--unixsocket", socketPath, "--save", "", "--appendonly", "no",
                "--client-output-buffer-limit", "pubsub", "0", "0", "0", "--io-threads", "\(ioThreads)",
                // Its default of 10,000 clients is below the fan-out benchmark's largest count.
                "--maxclients", "19900",
            ],
            socketPath: socketPath)
    }

    /// Resident memory of the process in bytes.
    var residentBytes: Int {
        guard let status = try? String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
            let kilobytes = Int(line.split(separator: " ").dropFirst().first ?? "")
        else { return 0 }
        return kilobytes * 1024
    }

    /// CPU time the process has used so far (user + system), in seconds.
    var cpuSeconds: Double { cpuSecondsOfProcess("\(process.processIdentifier)") }

    func stop(signal: Int32 = SIGTERM) {
        if process.isRunning { kill(process.processIdentifier, signal) }
        process.waitUntilExit()
    }

    deinit { stop(signal: SIGKILL) }
}

struct BenchmarkError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A connected Unix stream socket with blocking sends and buffered reads. Each benchmark hands a
/// socket to one thread for sending and at most one for reading.
final class UnixSocket: @unchecked Sendable {
    let descriptor: Int32
    var buffer: [UInt8] = []
    var bufferStart = 0

    init(path: String) throws {
        descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: path.utf8.prefix($0.count - 1)) }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard result == 0 else {
            Glibc.close(descriptor)
            throw BenchmarkError("connect \(path): errno \(errno)")
        }
    }

    func close() { Glibc.close(descriptor) }

    func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes {
                Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            // SIGCHLD from exiting child processes may interrupt the call.
            if sent < 0 && errno == EINTR { continue }
            guard sent > 0 else { throw BenchmarkError("send: errno \(errno)") }
            offset += sent
        }
    }

    /// Reads what is available (blocking for at least one byte); false on end of stream.
    /// The receive buffer `fill()` reuses (allocating and zeroing 64 KB per read cost the
    /// client more than the server's own work).
    private var chunk = [UInt8](repeating: 0, count: 1 << 16)
    /// How far `readLine` has looked for a newline without finding one.
    private var scanned = 0

    func fill() -> Bool {
        if bufferStart > 1 << 20 {
            buffer.removeFirst(bufferStart)
            scanned -= bufferStart
            bufferStart = 0
        }
        var count = recv(descriptor, &chunk, chunk.count, 0)
        while count < 0 && errno == EINTR { count = recv(descriptor, &chunk, chunk.count, 0) }
        guard count > 0 else { return false }
        buffer.append(contentsOf: chunk[..<count])
        return true
    }

    /// The next `\n`-terminated line without its terminator, or nil at end of stream.
    func readLine() -> ArraySlice<UInt8>? {
        while true {
            scanned = max(scanned, bufferStart)
            let newline = buffer.withUnsafeBufferPointer { bytes -> Int? in
                guard let base = bytes.baseAddress, scanned < bytes.count,
                    let found = memchr(base + scanned, 0x0a, bytes.count - scanned)
                else { return nil }
                return base.distance(to: found.assumingMemoryBound(to: UInt8.self))
            }
            if let newline {
                let line = buffer[bufferStart..<newline]
                bufferStart = newline + 1
                return line
            }
            scanned = buffer.count
            guard fill() else { return nil }
        }
    }
}

/// The index in `bytes` where the first `pattern` at or after `from` starts (memchr for its
/// first byte, then memcmp: the generic `firstRange(of:)` cost the client more than the
/// server's own work on a long event line).
func firstIndex(of pattern: [UInt8], in bytes: ArraySlice<UInt8>, from start: Int? = nil) -> Int? {
    let skip = (start ?? bytes.startIndex) - bytes.startIndex
    return bytes.withUnsafeBufferPointer { haystack in
        pattern.withUnsafeBufferPointer { needle -> Int? in
            guard let base = haystack.baseAddress, let needleBase = needle.baseAddress, let first = needle.first else {
                return nil
            }
            var offset = skip
            while offset + needle.count <= haystack.count,
                let hit = memchr(base + offset, Int32(first), haystack.count - offset - needle.count + 1)
            {
                let position = base.distance(to: hit.assumingMemoryBound(to: UInt8.self))
                if memcmp(base + position, needleBase, needle.count) == 0 { return bytes.startIndex + position }
                offset = position + 1
            }
            return nil
        }
    }
}

/// The integer after `"key":` in a JSON line, found without parsing the whole line.
func integerField(_ key: String, in line: ArraySlice<UInt8>) -> Int? {
    let pattern = Array("\"\(key)\":".utf8)
    guard let found = firstIndex(of: pattern, in: line) else { return nil }
    let start = found + pattern.count
    var value = 0
    var index = start
    while index < line.endIndex, line[index] >= 48, line[index] <= 57 {
        value = value * 10 + Int(line[index] - 48)
        index += 1
    }
    return index > start ? value : nil
}

func raiseFileLimit() {
    var limit = rlimit()
    getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    limit.rlim_cur = limit.rlim_max
    setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
}

func seconds(since start: ContinuousClock.Instant) -> Double {
    let (whole, fraction) = (ContinuousClock.now - start).components
    return Double(whole) + Double(fraction) / 1e18
}

/// Measures a pair, diffcastd's run and its peer's, the one first in even runs and the other in
/// odd ones: what the machine does to the first of a pair (or the host, to a run after an idle
/// spell) falls on both sides alike over the runs.
func measuredAlternately<Measured>(
    run: Int, ours: () throws -> Measured, peer: () throws -> Measured
) rethrows -> (ours: Measured, peer: Measured) {
    if run % 2 == 0 {
        let first = try ours()
        return (first, try peer())
    }
    let first = try peer()
    return (try ours(), first)
}

/// The median of a few runs' figures: the middle one, or the mean of the two middle ones when
/// their count is even (`percentile(values, 0.5)` takes the upper of the two, which over six
/// runs leans toward the better half).
func median(_ values: [Double]) -> Double {
    guard !values.isEmpty else { return 0 }
    let sorted = values.sorted()
    let middle = sorted.count / 2
    return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
}

/// The value below which `fraction` of `values` fall (the nearest rank): for latencies over many
/// samples; a few runs' figures take `median`.
func percentile(_ values: [Double], _ fraction: Double) -> Double {
    guard !values.isEmpty else { return 0 }
    let sorted = values.sorted()
    return sorted[min(sorted.count - 1, Int(Double(sorted.count) * fraction))]
}

/// CPU time (user + system) a process has used so far, in seconds: `pid` or `self`.
func cpuSecondsOfProcess(_ pid: String) -> Double {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let end = stat.lastIndex(of: ")")
    else { return 0 }
    // Fields after the command name: state is the first, utime the 12th, stime the 13th.
    let fields = stat[stat.index(after: end)...].split(separator: " ")
    guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// The machine's CPU time so far, from the first line of /proc/stat, in clock ticks: all of it,
/// and what the host took from this virtual machine's CPUs ("steal": time a virtual CPU was ready
/// to run and the host ran something else). To the guest, whatever was running when the host
/// took its CPU seems to run on: a thread shows as running for milliseconds without a system
/// call, and every latency across that stretch grows by it, whichever server is measured.
struct MachineCPUTime {
    var total: UInt64 = 0
    var steal: UInt64 = 0

    static func now() -> MachineCPUTime {
        guard let stat = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
            let line = stat.split(separator: "\n").first, line.hasPrefix("cpu ")
        else { return MachineCPUTime() }
        // user nice system idle iowait irq softirq steal (guest time is counted in user already).
        let ticks = line.split(separator: " ").dropFirst().prefix(8).compactMap { UInt64($0) }
        guard ticks.count == 8 else { return MachineCPUTime() }
        return MachineCPUTime(total: ticks.reduce(0, +), steal: ticks[7])
    }

    /// The share of the machine's CPU time the host took since `earlier` (0 where /proc/stat
    /// says nothing of it).
    func stealShare(since earlier: MachineCPUTime) -> Double {
        guard total > earlier.total else { return 0 }
        return Double(steal &- earlier.steal) / Double(total - earlier.total)
    }
}

/// This process's resident memory (from /proc/self/statm).
func residentBytesOfThisProcess() -> Int {
    let fields = (try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8))?.split(separator: " ") ?? []
    guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
    return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
}

/// Reads every subscriber socket on one thread with poll(2), calling `onBytes` per read.
func pollAll(_ sockets: [UnixSocket], until done: () -> Bool, _ onBytes: (Int, ArraySlice<UInt8>) -> Void) {
    var descriptors = sockets.map { pollfd(fd: $0.descriptor, events: Int16(POLLIN), revents: 0) }
    var chunk = [UInt8](repeating: 0, count: 1 << 16)
    while !done() {
        guard poll(&descriptors, nfds_t(descriptors.count), 1000) > 0 else { continue }
        for index in descriptors.indices where descriptors[index].revents != 0 {
            let count = recv(descriptors[index].fd, &chunk, chunk.count, Int32(MSG_DONTWAIT))
            if count > 0 { onBytes(index, chunk[..<count]) }
        }
    }
}

/// Seconds from the sending of write `index` to `receipt`; an event can overtake the
/// writer's bookkeeping, so this waits until the send time is recorded.
func latency(
    ofWrite index: Int, receivedAt receipt: ContinuousClock.Instant,
    sent: borrowing Mutex<[ContinuousClock.Instant]>
) -> Double {
    while true {
        if let sentAt = sent.withLock({ index < $0.count ? $0[index] : nil }) {
            let (whole, fraction) = (receipt - sentAt).components
            return Double(whole) + Double(fraction) / 1e18
        }
        usleep(50)
    }
}

/// One publisher writes `writes` ~1 KB updates of one item to `collection` (made first, with
/// that item) through `publisherPath`, each after the last one's answer; `subscribers`
/// subscriptions, spread over `subscriberPaths`, count them. `beforeWriting` runs once every
/// subscription is made. Returns deliveries per second and the latency of every delivery.
func updateLatencies(
    publisherPath: String, subscriberPaths: [String], collection: String, subscribers: Int, writes: Int,
    beforeWriting: () -> Void = {}
) throws -> (deliveriesPerSecond: Double, latencies: [Double]) {
    let publisher = try UnixSocket(path: publisherPath)
    try publisher.send(Array("apply \(collection) {\"sections\":[{\"id\":\"s\",\"items\":[\"a\"]}]}\n".utf8))
    _ = publisher.readLine()
    var sockets: [UnixSocket] = []
    for index in 0..<subscribers {
        let socket = try UnixSocket(path: subscriberPaths[index % subscriberPaths.count])
        try socket.send(Array("subscribe \(collection)\n".utf8))
        sockets.append(socket)
    }
    defer { sockets.forEach { $0.close() } }
    // Wait for every subscription (response and snapshot) before measuring.
    for socket in sockets {
        _ = socket.readLine()
        _ = socket.readLine()
    }
    beforeWriting()
    let sent = Mutex<[ContinuousClock.Instant]>([])
    let latencies = Mutex<[Double]>([])
    let deliveries = Atomic<Int>(0)
    let expected = subscribers * writes
    let began = ContinuousClock.now
    Thread {
        let blob = String(repeating: "x", count: 900)
        for index in 0..<writes {
            sent.withLock { $0.append(ContinuousClock.now) }
            try? publisher.send(
                Array("update_items \(collection) {\"items\":[{\"id\":\"a\",\"data\":\"\(index)\(blob)\"}]}\n".utf8))
            guard publisher.readLine() != nil else { return }
        }
    }.start()
    // Each write is one version and one event line per subscriber (writes wait for their ack,
    // so none coalesce into one version): the k-th line a subscriber reads is the k-th write.
    // Newlines are found with memchr, so counting them costs the reader about what counting
    // bytes does for Redis.
    var linesSeen = Array(repeating: 0, count: sockets.count)
    pollAll(sockets, until: { deliveries.load(ordering: .relaxed) >= expected }) { index, bytes in
        let now = ContinuousClock.now
        for _ in 0..<newlines(in: bytes) {
            let latency = latency(ofWrite: linesSeen[index], receivedAt: now, sent: sent)
            linesSeen[index] += 1
            latencies.withLock { $0.append(latency) }
            deliveries.add(1, ordering: .relaxed)
        }
    }
    return (Double(expected) / seconds(since: began), latencies.withLock { $0 })
}

/// How many newline bytes `bytes` holds, found with memchr.
func newlines(in bytes: ArraySlice<UInt8>) -> Int {
    bytes.withUnsafeBytes { newlines(in: $0) }
}

/// How many newline bytes `buffer` holds, found with memchr.
func newlines(in buffer: UnsafeRawBufferPointer) -> Int {
    guard var cursor = buffer.baseAddress else { return 0 }
    let end = cursor + buffer.count
    var found = 0
    while cursor < end, let hit = memchr(cursor, Int32(UInt8(ascii: "\n")), end - cursor) {
        found += 1
        cursor = UnsafeRawPointer(hit) + 1
    }
    return found
}

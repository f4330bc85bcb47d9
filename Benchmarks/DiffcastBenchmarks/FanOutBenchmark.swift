import ArgumentParser
import CReader
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The core job of a pub-sub daemon, in the shape of a busy page: thousands of subscribers on
/// one collection, one write at a time, each write delivered to every subscriber before the next
/// is sent. Against Redis pub/sub (one channel, the same ~100-byte payload), alternated in one
/// run, over Unix sockets. The subscribers are read by one thread with epoll, the cheapest reader
/// there is, so the machine's second core is the client's.
struct FanOutBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fanout",
        abstract: "One write at a time to 1,000 / 5,000 / 19,000 subscribers of one collection, against Redis pub/sub.")

    @Option(parsing: .upToNextOption, help: "Subscriber counts, one table row each.")
    var subscribers = [1000, 5000, 19000]

    @Option(help: "Deliveries measured per run: writes = deliveries ÷ subscribers (at least 50).")
    var deliveries = 2_000_000

    @Option(help: "Runs per count, diffcastd and Redis each first in every other run; the table gives their medians.")
    var runs = 3

    @Option(help: "Threads that write to subscribers, in both servers (diffcastd's io_threads, Redis's io-threads).")
    var ioThreads = 1

    @Flag(help: "diffcastd alone (to profile it), no Redis and no ratios.")
    var diffcastOnly = false

    /// ~100 bytes of content per item, as in the feed.
    private static let text = String(repeating: "x", count: 80)

    func run() throws {
        raiseFileLimit()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("dc-fanout-\(getpid())").path
        mkdir(directory, 0o755)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        emit(
            "## Fan-out: one ~100-byte append at a time to every subscriber of one collection (io threads: \(ioThreads))\n"
        )
        emit("Each write is sent once every subscriber holds the one before; \"to reach all\" is from the send")
        emit("to the last subscriber's read. Medians of \(runs) alternated runs per count.\n")
        emit(
            "| subscribers | server | deliveries/s | p50 to reach all (ms) | p99 to reach all (ms) | server CPU per delivery (µs) | reader CPU per delivery (µs) | memory per subscriber (KB) | CPU taken by the host (%) |"
        )
        emit("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
        var summary: [String] = []
        for count in subscribers {
            var ours: [Result] = []
            var theirs: [Result] = []
            for run in 0..<max(1, runs) {
                let measureOurs = { try measureDiffcast(subscribers: count, at: directory + "/d.sock") }
                guard !diffcastOnly else {
                    ours.append(try measureOurs())
                    continue
                }
                let pair = try measuredAlternately(
                    run: run, ours: measureOurs,
                    peer: { try measureRedis(subscribers: count, at: directory + "/r.sock") })
                ours.append(pair.ours)
                theirs.append(pair.peer)
            }
            guard !diffcastOnly else {
                emit(Result.medians(of: ours).row(subscribers: count, server: "diffcastd"))
                continue
            }
            let diffcast = Result.medians(of: ours)
            let redis = Result.medians(of: theirs)
            emit(diffcast.row(subscribers: count, server: "diffcastd"))
            emit(redis.row(subscribers: count, server: "redis pub/sub"))
            let ratios = zip(ours, theirs).map { $0.deliveriesPerSecond / $1.deliveriesPerSecond }
            summary.append(
                String(
                    format: "%d subscribers: deliveries/s %.2f× Redis (runs %@), p50 %.2f×, p99 %.2f×", count,
                    median(ratios), ratios.map { String(format: "%.2f", $0) }.joined(separator: ", "),
                    diffcast.p50 / redis.p50, diffcast.p99 / redis.p99))
        }
        guard !summary.isEmpty else { return }
        emit("\nRatios diffcastd ÷ Redis (medians; a latency ratio below 1 is Diffcast ahead):\n")
        for line in summary { emit("- " + line) }
        emit("")
    }

    struct Result {
        var deliveriesPerSecond: Double
        var p50: Double
        var p99: Double
        var serverCPUPerDelivery: Double
        /// The benchmark's reader: when it is near the server's, the reader sets the pace.
        var readerCPUPerDelivery: Double
        var bytesPerSubscriber: Double
        /// The share of the machine's CPU time the host took while it ran (`MachineCPUTime`).
        var stolen: Double

        static func medians(of results: [Result]) -> Result {
            Result(
                deliveriesPerSecond: median(results.map(\.deliveriesPerSecond)),
                p50: median(results.map(\.p50)), p99: median(results.map(\.p99)),
                serverCPUPerDelivery: median(results.map(\.serverCPUPerDelivery)),
                readerCPUPerDelivery: median(results.map(\.readerCPUPerDelivery)),
                bytesPerSubscriber: median(results.map(\.bytesPerSubscriber)),
                stolen: median(results.map(\.stolen)))
        }

        func row(subscribers: Int, server: String) -> String {
            String(
                format: "| %d | %@ | %.0f | %.2f | %.2f | %.2f | %.2f | %.2f | %.1f |", subscribers, server,
                deliveriesPerSecond,
                p50 * 1000, p99 * 1000, serverCPUPerDelivery * 1e6, readerCPUPerDelivery * 1e6,
                bytesPerSubscriber / 1024, stolen * 100)
        }
    }

    /// Writes measured for `count` subscribers.
    private func writes(for count: Int) -> Int { max(50, deliveries / count) }

    private func measureDiffcast(subscribers count: Int, at path: String) throws -> Result {
        let server = try ServerProcess.diffcastd(
            socketPath: path,
            arguments: ["--max-connections", "\(count + 100)", "--io-threads", "\(ioThreads)"])
        defer { server.stop() }
        let publisher = try UnixSocket(path: path)
        try publisher.send(Array("apply feed {\"sections\":[{\"id\":\"s\"}]}\n".utf8))
        _ = publisher.readLine()
        // A subscriber's snapshot and its answer: two lines.
        let fleet = try Subscribers(
            count: count, path: path, request: Array("subscribe feed\n".utf8), settled: { $0.newlines >= 2 },
            server: server)
        defer { fleet.close() }
        return try fleet.measure(writes: writes(for: count), server: server) { index in
            try publisher.send(
                Array(
                    "{\"op\":\"append_items\",\"collection\":\"feed\",\"items\":[{\"id\":\"f\(index)\",\"data\":{\"text\":\"\(Self.text)\"}}]}\n"
                        .utf8))
        } arrived: { tally in
            // One event line per write.
            tally.newlines - 2
        } answered: {
            guard publisher.readLine() != nil else { throw BenchmarkError("diffcastd closed the publisher") }
        }
    }

    private func measureRedis(subscribers count: Int, at path: String) throws -> Result {
        let server = try ServerProcess.redis(socketPath: path, ioThreads: ioThreads)
        defer { server.stop() }
        let publisher = try UnixSocket(path: path)
        let message: (Int) -> String = { index in
            "{\"id\":\"f" + String(format: "%07d", index) + "\",\"data\":{\"text\":\"\(Self.text)\"}}"
        }
        let messageBytes =
            "*3\r\n$7\r\nmessage\r\n$4\r\nfeed\r\n$\(message(0).utf8.count)\r\n\(message(0))\r\n".utf8.count
        let reply = "*3\r\n$9\r\nsubscribe\r\n$4\r\nfeed\r\n:1\r\n".utf8.count
        let fleet = try Subscribers(
            count: count, path: path, request: Array("SUBSCRIBE feed\r\n".utf8), settled: { $0.bytes >= reply },
            server: server)
        defer { fleet.close() }
        return try fleet.measure(writes: writes(for: count), server: server) { index in
            let text = message(index)
            try publisher.send(Array("*3\r\n$7\r\nPUBLISH\r\n$4\r\nfeed\r\n$\(text.utf8.count)\r\n\(text)\r\n".utf8))
        } arrived: { tally in
            (tally.bytes - reply) / messageBytes
        } answered: {
            // PUBLISH answers with the number of receivers, one line.
            guard publisher.readLine() != nil else { throw BenchmarkError("redis closed the publisher") }
        }
    }
}

/// What one subscriber has received so far: bytes and newlines (no other state per subscriber,
/// so that 19,000 of them cost the reader little memory).
private struct Tally {
    var bytes = 0
    var newlines = 0
}

/// Many subscriber sockets read by one thread through epoll.
///
/// The reader is the other end of every delivery, and on two cores it has one while the server
/// has the other: when it costs as much per delivery as the server, it sets the pace, and the
/// table measures the reader. So each of its costs is the least a reader's can be, the same for
/// both servers. Readiness is edge-triggered: a socket is reported once per arrival, where a
/// level-triggered one is polled again at the next wait only to be found empty. Each report is
/// answered by draining the socket with the raw system call (`bench_recv_now`). The tallies and
/// the buffer are raw memory, which Swift reads without the dynamic exclusivity checks of a
/// class's stored `var`s.
private final class Subscribers {
    let descriptors: [Int32]
    let tallies: UnsafeMutableBufferPointer<Tally>
    let chunk: UnsafeMutableRawBufferPointer
    let poller: Int32
    var bytesPerSubscriber = 0.0

    /// Connects `count` subscribers, sends each `request`, and waits until every one is
    /// `settled`; what the server's resident memory grew by meanwhile is shared among them.
    init(count: Int, path: String, request: [UInt8], settled: (Tally) -> Bool, server: ServerProcess) throws {
        let baseline = server.residentBytes
        poller = epoll_create1(Int32(EPOLL_CLOEXEC))
        tallies = .allocate(capacity: count)
        tallies.initialize(repeating: Tally())
        chunk = .allocate(byteCount: 1 << 16, alignment: 16)
        var descriptors: [Int32] = []
        descriptors.reserveCapacity(count)
        for index in 0..<count {
            let socket = try UnixSocket(path: path)
            try socket.send(request)
            var event = epoll_event()
            event.events = EPOLLIN.rawValue | EPOLLET.rawValue
            event.data.u64 = UInt64(index)
            epoll_ctl(poller, EPOLL_CTL_ADD, socket.descriptor, &event)
            descriptors.append(socket.descriptor)
        }
        self.descriptors = descriptors
        var waiting = count
        let deadline = ContinuousClock.now + .seconds(120)
        var ready = [epoll_event](repeating: epoll_event(), count: 1024)
        var settledOnes = [Bool](repeating: false, count: count)
        while waiting > 0 {
            guard ContinuousClock.now < deadline else { throw BenchmarkError("subscribers not settled in 120 s") }
            let got = epoll_wait(poller, &ready, Int32(ready.count), 1000)
            for event in ready.prefix(max(0, Int(got))) {
                let index = Int(event.data.u64)
                drain(index)
                if !settledOnes[index] && settled(tallies[index]) {
                    settledOnes[index] = true
                    waiting -= 1
                }
            }
        }
        usleep(200_000)
        bytesPerSubscriber = Double(max(0, server.residentBytes - baseline)) / Double(count)
    }

    deinit {
        tallies.deallocate()
        chunk.deallocate()
    }

    func close() {
        for descriptor in descriptors { Glibc.close(descriptor) }
        Glibc.close(poller)
    }

    /// Reads subscriber `index` until its socket is empty, as an edge-triggered report asks: a
    /// read that fills the buffer may have left more behind.
    private func drain(_ index: Int) {
        let descriptor = descriptors[index]
        while true {
            let got = bench_recv_now(descriptor, chunk.baseAddress, chunk.count)
            if got < 0 && errno == EINTR { continue }
            // Empty (EAGAIN), closed, or failed: a server that stops delivering shows as
            // subscribers still waiting when `measure` gives up.
            guard got > 0 else { return }
            tallies[index].bytes += got
            tallies[index].newlines += newlines(in: UnsafeRawBufferPointer(rebasing: chunk[..<got]))
            guard got == chunk.count else { return }
        }
    }

    /// Sends `writes` writes, each once every subscriber has `arrived` at the one before (plus
    /// a tenth as warm-up, not counted).
    func measure(
        writes: Int, server: ServerProcess, send: (Int) throws -> Void, arrived: (Tally) -> Int,
        answered: () throws -> Void
    ) throws -> FanOutBenchmark.Result {
        var ready = [epoll_event](repeating: epoll_event(), count: 1024)
        let warmUp = max(5, writes / 10)
        var times: [Double] = []
        times.reserveCapacity(writes)
        var serverCPU = 0.0
        var readerCPU = 0.0
        var machineCPU = MachineCPUTime()
        var began = ContinuousClock.now
        // The last write each subscriber was counted as holding.
        var reached = [Int](repeating: -1, count: descriptors.count)
        for index in 0..<(warmUp + writes) {
            if index == warmUp {
                serverCPU = server.cpuSeconds
                readerCPU = cpuSecondsOfProcess("self")
                machineCPU = .now()
                began = .now
            }
            let sent = ContinuousClock.now
            try send(index)
            var waiting = descriptors.count
            while waiting > 0 {
                let got = epoll_wait(poller, &ready, Int32(ready.count), 5000)
                guard got > 0 else {
                    throw BenchmarkError("no delivery for 5 s (write \(index), \(waiting) subscribers waiting)")
                }
                for event in ready.prefix(Int(got)) {
                    let subscriber = Int(event.data.u64)
                    drain(subscriber)
                    if reached[subscriber] < index && arrived(tallies[subscriber]) > index {
                        reached[subscriber] = index
                        waiting -= 1
                    }
                }
            }
            if index >= warmUp { times.append(seconds(since: sent)) }
            try answered()
        }
        let elapsed = seconds(since: began)
        return FanOutBenchmark.Result(
            deliveriesPerSecond: Double(writes * descriptors.count) / elapsed, p50: percentile(times, 0.5),
            p99: percentile(times, 0.99),
            serverCPUPerDelivery: (server.cpuSeconds - serverCPU) / Double(writes * descriptors.count),
            readerCPUPerDelivery: (cpuSecondsOfProcess("self") - readerCPU) / Double(writes * descriptors.count),
            bytesPerSubscriber: bytesPerSubscriber, stolen: MachineCPUTime.now().stealShare(since: machineCPU))
    }
}

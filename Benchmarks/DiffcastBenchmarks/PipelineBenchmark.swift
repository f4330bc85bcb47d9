import ArgumentParser
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The daemon end to end, against Redis pub/sub on the same machine in the same run.
struct PipelineBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pipeline", abstract: "Publisher → daemon → subscribers, against Redis pub/sub.")

    @Option(help: "Pipelined writes of the fan-out table.")
    var writes = 200_000

    @Option(help: "Subscribers of the fan-out table.")
    var subscribers = 10

    @Option(help: "Subscribers of the latency table.")
    var manySubscribers = 1000

    @Option(help: "Writes of the latency table (one at a time).")
    var latencyWrites = 2000

    func run() throws {
        raiseFileLimit()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("dc-bench-\(getpid())").path
        mkdir(directory, 0o755)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        emit("## Fan-out: one publisher pipelining \(writes) small writes, \(subscribers) subscribers\n")
        emit(
            "| server | writes/s | versions published | time until every subscriber holds the last (s) | server CPU per write (µs) | client CPU per write (µs) | peak RSS (MB) |"
        )
        emit("|---|---:|---:|---:|---:|---:|---:|")
        let ours = try fanOutDiffcast(directory + "/d.sock")
        emit(ours.row("diffcastd"))
        let redis = try fanOutRedis(directory + "/r.sock")
        emit(redis.row("redis pub/sub (each write a PUBLISH)"))
        emit(
            String(
                format:
                    "\nRatio diffcastd / redis: writes/s %.2f×, time until all delivered %.2f×, CPU per write %.2f×\n",
                ours.writesPerSecond / redis.writesPerSecond, ours.allDelivered / redis.allDelivered,
                ours.cpuPerWrite / redis.cpuPerWrite))
        emit("## Latency: \(manySubscribers) subscribers, ~1 KB changesets, \(latencyWrites) writes one at a time\n")
        emit("| server | deliveries/s | p50 latency (ms) | p99 latency (ms) | peak RSS (MB) |")
        emit("|---|---:|---:|---:|---:|")
        // Each server with one thread writing and with two (diffcastd's io_threads, Redis's
        // io-threads), alternated.
        let latency1 = try latencyDiffcast(directory + "/d2.sock", ioThreads: 1)
        emit(latency1.row("diffcastd"))
        let redis1 = try latencyRedis(directory + "/r2.sock", ioThreads: 1)
        emit(redis1.row("redis pub/sub"))
        let latency2 = try latencyDiffcast(directory + "/d3.sock", ioThreads: 2)
        emit(latency2.row("diffcastd, io_threads 2"))
        let redis2 = try latencyRedis(directory + "/r3.sock", ioThreads: 2)
        emit(redis2.row("redis pub/sub, io-threads 2"))
        emit(
            String(
                format:
                    "\nRatio diffcastd / redis, 1 thread: deliveries/s %.2f×, p99 latency %.2f×; 2 threads: %.2f×, %.2f×",
                latency1.deliveriesPerSecond / redis1.deliveriesPerSecond,
                percentile(latency1.latencies, 0.99) / percentile(redis1.latencies, 0.99),
                latency2.deliveriesPerSecond / redis2.deliveriesPerSecond,
                percentile(latency2.latencies, 0.99) / percentile(redis2.latencies, 0.99)))
        emit(
            String(
                format: "Two threads / one: diffcastd %.2f×, redis %.2f×\n",
                latency2.deliveriesPerSecond / latency1.deliveriesPerSecond,
                redis2.deliveriesPerSecond / redis1.deliveriesPerSecond))
    }

    struct FanOut {
        var writesPerSecond: Double
        var versions: Int
        var allDelivered: Double
        /// The server's CPU time (all its threads) from the first write until every subscriber
        /// held the last, per write: what the machine's noise changes least.
        var cpuPerWrite: Double
        /// The benchmark's own CPU time (publisher and subscribers), per write.
        var clientCPUPerWrite: Double
        var peakResident: Int

        func row(_ name: String) -> String {
            String(
                format: "| %@ | %.0f | %d | %.2f | %.2f | %.2f | %.0f |", name, writesPerSecond, versions, allDelivered,
                cpuPerWrite * 1e6, clientCPUPerWrite * 1e6, Double(peakResident) / 1e6)
        }
    }

    struct Latency {
        var deliveriesPerSecond: Double
        var latencies: [Double]
        var peakResident: Int

        func row(_ name: String) -> String {
            String(
                format: "| %@ | %.0f | %.2f | %.2f | %.0f |", name, deliveriesPerSecond,
                percentile(latencies, 0.5) * 1000, percentile(latencies, 0.99) * 1000, Double(peakResident) / 1e6)
        }
    }

    /// Samples a process's resident memory until stopped; returns the peak.
    final class MemorySampler: Sendable {
        private let peak = Mutex(0)
        private let running = Mutex(true)

        init(_ server: ServerProcess) {
            Thread { [self] in
                while running.withLock({ $0 }) {
                    let resident = server.residentBytes
                    peak.withLock { $0 = max($0, resident) }
                    usleep(10_000)
                }
            }.start()
        }

        func stop() -> Int {
            running.withLock { $0 = false }
            usleep(20_000)
            return peak.withLock { $0 }
        }
    }

    private func fanOutDiffcast(_ path: String) throws -> FanOut {
        let server = try ServerProcess.diffcastd(socketPath: path)
        defer { server.stop() }
        let setup = try UnixSocket(path: path)
        let items = (0..<1000).map { "\"i\($0)\"" }.joined(separator: ",")
        try setup.send(Array("apply bench {\"sections\":[{\"id\":\"s\",\"items\":[\(items)]}]}\n".utf8))
        _ = setup.readLine()
        let target = Atomic<Int>(Int.max)
        let group = DispatchGroup()
        let finished = Mutex<[Double]>([])
        let start = Mutex<ContinuousClock.Instant>(.now)
        for _ in 0..<subscribers {
            let socket = try UnixSocket(path: path)
            try socket.send(Array("subscribe bench\n".utf8))
            DispatchQueue.global().async(group: group) {
                var latest = 0
                while let line = socket.readLine() {
                    if line.starts(with: Array("{\"event\"".utf8)), let version = integerField("version", in: line) {
                        latest = version
                    }
                    if latest >= target.load(ordering: .acquiring) {
                        let began = start.withLock { $0 }
                        finished.withLock { $0.append(seconds(since: began)) }
                        return
                    }
                }
            }
        }
        usleep(200_000)
        let sampler = MemorySampler(server)
        let publisher = try UnixSocket(path: path)
        var payload: [UInt8] = []
        for index in 0..<writes {
            payload.append(
                contentsOf:
                    "{\"op\":\"update_items\",\"collection\":\"bench\",\"items\":[{\"id\":\"i\(index % 1000)\",\"data\":{\"n\":\(index)}}]}\n"
                    .utf8)
        }
        let allWrites = payload
        let cpuBefore = server.cpuSeconds
        let clientBefore = cpuSecondsOfProcess("self")
        let began = ContinuousClock.now
        start.withLock { $0 = began }
        let sender = Thread { try? publisher.send(allWrites) }
        sender.start()
        // Only the last answer's version is needed (the Redis publisher reads its answers too).
        var lastAnswer: ArraySlice<UInt8> = []
        for _ in 0..<writes {
            guard let line = publisher.readLine() else { throw BenchmarkError("publisher connection closed") }
            lastAnswer = line
        }
        let lastVersion = integerField("version", in: lastAnswer) ?? 0
        let acknowledged = seconds(since: began)
        target.store(lastVersion, ordering: .releasing)
        // Subscribers blocked in a read wake with the next event: nudge them with one more write.
        try setup.send(Array("update_items bench {\"items\":[{\"id\":\"i0\",\"data\":\"end\"}]}\n".utf8))
        group.wait()
        return FanOut(
            writesPerSecond: Double(writes) / acknowledged, versions: lastVersion - 1,
            allDelivered: finished.withLock { $0.max() ?? 0 },
            cpuPerWrite: (server.cpuSeconds - cpuBefore) / Double(writes),
            clientCPUPerWrite: (cpuSecondsOfProcess("self") - clientBefore) / Double(writes),
            peakResident: sampler.stop())
    }

    private func redisPublish(_ channel: String, _ message: String) -> [UInt8] {
        Array(
            "*3\r\n$7\r\nPUBLISH\r\n$\(channel.utf8.count)\r\n\(channel)\r\n$\(message.utf8.count)\r\n\(message)\r\n"
                .utf8)
    }

    private func redisMessageBytes(_ channel: String, _ message: String) -> Int {
        "*3\r\n$7\r\nmessage\r\n$\(channel.utf8.count)\r\n\(channel)\r\n$\(message.utf8.count)\r\n\(message)\r\n".utf8
            .count
    }

    private var redisSubscribeReplyBytes: Int { "*3\r\n$9\r\nsubscribe\r\n$5\r\nbench\r\n:1\r\n".utf8.count }

    private func fanOutRedis(_ path: String) throws -> FanOut {
        let server = try ServerProcess.redis(socketPath: path)
        defer { server.stop() }
        // The same bytes of content per write as the diffcast update: a padded counter.
        let message = { (index: Int) in "{\"id\":\"i\(index % 1000)\",\"n\":" + String(format: "%08d", index) + "}" }
        let messageBytes = redisMessageBytes("bench", message(0))
        let group = DispatchGroup()
        let finished = Mutex<[Double]>([])
        let start = Mutex<ContinuousClock.Instant>(.now)
        let expected = redisSubscribeReplyBytes + writes * messageBytes
        for _ in 0..<subscribers {
            let socket = try UnixSocket(path: path)
            try socket.send(Array("SUBSCRIBE bench\r\n".utf8))
            DispatchQueue.global().async(group: group) {
                var received = 0
                var chunk = [UInt8](repeating: 0, count: 1 << 16)
                while received < expected {
                    let count = recv(socket.descriptor, &chunk, chunk.count, 0)
                    guard count > 0 else { return }
                    received += count
                }
                let began = start.withLock { $0 }
                finished.withLock { $0.append(seconds(since: began)) }
            }
        }
        usleep(200_000)
        let sampler = MemorySampler(server)
        let publisher = try UnixSocket(path: path)
        var payload: [UInt8] = []
        for index in 0..<writes { payload.append(contentsOf: redisPublish("bench", message(index))) }
        let allWrites = payload
        let cpuBefore = server.cpuSeconds
        let clientBefore = cpuSecondsOfProcess("self")
        let began = ContinuousClock.now
        start.withLock { $0 = began }
        let sender = Thread { try? publisher.send(allWrites) }
        sender.start()
        for _ in 0..<writes {
            guard publisher.readLine() != nil else { throw BenchmarkError("redis publisher closed") }
        }
        let acknowledged = seconds(since: began)
        group.wait()
        return FanOut(
            writesPerSecond: Double(writes) / acknowledged, versions: writes,
            allDelivered: finished.withLock { $0.max() ?? 0 },
            cpuPerWrite: (server.cpuSeconds - cpuBefore) / Double(writes),
            clientCPUPerWrite: (cpuSecondsOfProcess("self") - clientBefore) / Double(writes),
            peakResident: sampler.stop())
    }

    private func latencyDiffcast(_ path: String, ioThreads: Int) throws -> Latency {
        let server = try ServerProcess.diffcastd(socketPath: path, arguments: ["--io-threads", "\(ioThreads)"])
        defer { server.stop() }
        var sampler: MemorySampler?
        let measured = try updateLatencies(
            publisherPath: path, subscriberPaths: [path], collection: "lat", subscribers: manySubscribers,
            writes: latencyWrites
        ) { sampler = MemorySampler(server) }
        return Latency(
            deliveriesPerSecond: measured.deliveriesPerSecond, latencies: measured.latencies,
            peakResident: sampler?.stop() ?? 0)
    }

    private func latencyRedis(_ path: String, ioThreads: Int) throws -> Latency {
        let server = try ServerProcess.redis(socketPath: path, ioThreads: ioThreads)
        defer { server.stop() }
        let sample = String(format: "%08d", 0) + String(repeating: "x", count: 1016)
        let messageBytes = redisMessageBytes("bench", sample)
        var sockets: [UnixSocket] = []
        for _ in 0..<manySubscribers {
            let socket = try UnixSocket(path: path)
            try socket.send(Array("SUBSCRIBE bench\r\n".utf8))
            sockets.append(socket)
        }
        var received = Array(repeating: 0, count: sockets.count)
        for (index, socket) in sockets.enumerated() {
            while received[index] < redisSubscribeReplyBytes {
                guard socket.fill() else { throw BenchmarkError("redis subscriber closed") }
                received[index] = socket.buffer.count
            }
            received[index] -= redisSubscribeReplyBytes
        }
        let sent = Mutex<[ContinuousClock.Instant]>([])
        let latencies = Mutex<[Double]>([])
        let deliveries = Atomic<Int>(0)
        let expected = manySubscribers * latencyWrites
        let sampler = MemorySampler(server)
        let publisher = try UnixSocket(path: path)
        let began = ContinuousClock.now
        let writes = latencyWrites
        let writer = Thread {
            for index in 0..<writes {
                let before = ContinuousClock.now
                sent.withLock { $0.append(before) }
                try? publisher.send(
                    redisPublishBytes(String(format: "%08d", index) + String(repeating: "x", count: 1016)))
                guard publisher.readLine() != nil else { return }
            }
        }
        writer.start()
        pollAll(sockets, until: { deliveries.load(ordering: .relaxed) >= expected }) { index, bytes in
            let before = received[index] / messageBytes
            received[index] += bytes.count
            let after = received[index] / messageBytes
            guard after > before else { return }
            let now = ContinuousClock.now
            for message in before..<after {
                let latency = latency(ofWrite: message, receivedAt: now, sent: sent)
                latencies.withLock { $0.append(latency) }
                deliveries.add(1, ordering: .relaxed)
            }
        }
        let elapsed = seconds(since: began)
        return Latency(
            deliveriesPerSecond: Double(expected) / elapsed, latencies: latencies.withLock { $0 },
            peakResident: sampler.stop())
    }
}

func redisPublishBytes(_ message: String) -> [UInt8] {
    Array("*3\r\n$7\r\nPUBLISH\r\n$5\r\nbench\r\n$\(message.utf8.count)\r\n\(message)\r\n".utf8)
}

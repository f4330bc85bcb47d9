import ArgumentParser
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The most common shape of real use — a timeline, a log, a chat: one publisher appends small
/// items to one growing collection, subscribers receive every item. Against Redis pub/sub with
/// the same publisher (a window of unanswered writes), the same message sizes, the same run.
struct FeedBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "feed", abstract: "A growing feed: pipelined appends to one collection, against Redis pub/sub.")

    @Option(help: "Items appended, one write each.")
    var writes = 200_000

    @Option(help: "Subscribers, each counting every item.")
    var subscribers = 10

    @Option(help: "Unanswered writes the publisher allows itself.")
    var window = 64

    @Option(
        help:
            "Runs of diffcastd and Redis, each first in every other run; with more than one, the medians close the table."
    )
    var runs = 1

    @Flag(
        help:
            "Instead of Redis, diffcastd with capability tokens: every client presents an HS256 token (auth) before it starts."
    )
    var scoped = false

    /// ~100 bytes of content per item, as in the issue's workload.
    private static let text = String(repeating: "x", count: 80)

    func run() throws {
        raiseFileLimit()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("dc-feed-\(getpid())").path
        mkdir(directory, 0o755)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        emit(
            "## Growing feed: \(writes) appends of one ~100-byte item, window \(window), \(subscribers) subscribers\n")
        emit("Deliveries: items received by subscribers (writes × subscribers); latency: from the write's send")
        emit("to its item's arrival at a subscriber, over every delivery.\n")
        emit(
            "| server | items held at the end | last version | deliveries/s | p50 latency (ms) | p99 latency (ms) | p99.9 latency (ms) | max latency (ms) | server CPU per write (µs) | client CPU per write (µs) | peak RSS (MB) | CPU taken by the host (%) |"
        )
        emit("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        // One run is not the level here (the ratio moves by ±15% from run to run): the runs
        // alternate (`measuredAlternately`), and their medians close the table.
        var ratios: [Double] = []
        var p99Ratios: [Double] = []
        var maximumRatios: [Double] = []
        /// Of the runs in which the host took no CPU from either side (a run's maximum is most
        /// often a stretch the host took: `MachineCPUTime`).
        var calmMaximumRatios: [Double] = []
        let scopedAccess = scoped ? try ScopedAccess(directory: directory) : nil
        let peerName =
            scoped ? "diffcastd, every client with a capability token" : "redis pub/sub (each append a PUBLISH)"
        for run in 0..<max(1, runs) {
            let (ours, peer) = try measuredAlternately(
                run: run,
                ours: {
                    let ours = try feed(diffcastAt: directory + "/d.sock")
                    emit(ours.row("diffcastd"))
                    return ours
                },
                peer: {
                    let peer =
                        try scopedAccess.map { try feed(diffcastAt: directory + "/s.sock", access: $0) }
                        ?? feed(redisAt: directory + "/r.sock")
                    emit(peer.row(peerName))
                    return peer
                })
            // With tokens, the ratios are scoped ÷ plain; else diffcastd ÷ Redis.
            let (numerator, denominator) = scoped ? (peer, ours) : (ours, peer)
            ratios.append(numerator.deliveriesPerSecond / denominator.deliveriesPerSecond)
            p99Ratios.append(percentile(numerator.latencies, 0.99) / percentile(denominator.latencies, 0.99))
            let maximumRatio = numerator.maximumLatency / denominator.maximumLatency
            maximumRatios.append(maximumRatio)
            if numerator.stolen == 0 && denominator.stolen == 0 { calmMaximumRatios.append(maximumRatio) }
        }
        if ratios.count == 1 {
            emit(
                String(
                    format:
                        "\nRatio \(scoped ? "with tokens / without" : "diffcastd / redis"): deliveries/s %.2f×, p99 latency %.2f×\n",
                    ratios[0],
                    p99Ratios[0]))
        } else {
            let list = { (values: [Double]) in values.map { String(format: "%.2f", $0) }.joined(separator: ", ") }
            emit(
                String(
                    format:
                        "\nRatio \(scoped ? "with tokens / without" : "diffcastd / redis") over %d alternated runs: deliveries/s median %.2f× (%@), p99 latency median %.2f× (%@); p99 below the other's in %d of %d; maximum latency median %.2f× (%@), at or below the other's in %d of %d\n",
                    ratios.count, median(ratios), list(ratios), median(p99Ratios), list(p99Ratios),
                    p99Ratios.count { $0 < 1 }, p99Ratios.count, median(maximumRatios), list(maximumRatios),
                    maximumRatios.count { $0 <= 1 }, maximumRatios.count))
            emit(
                "Maximum latency at or below the other's in the runs the host took no CPU from: \(calmMaximumRatios.count { $0 <= 1 }) of \(calmMaximumRatios.count)\n"
            )
        }
    }

    struct Result {
        var deliveriesPerSecond: Double
        var latencies: [Double]
        /// The last write's version (Redis has none): how many versions carried the writes.
        var versions: Int
        /// The server's and the benchmark's own CPU time per write, while it ran.
        var serverCPUPerWrite: Double
        var clientCPUPerWrite: Double
        var peakResident: Int
        var held: Int
        /// The share of the machine's CPU time the host took while it ran (`MachineCPUTime`):
        /// a run's maximum latency is most often a stretch the host took.
        var stolen: Double

        var maximumLatency: Double { latencies.max() ?? 0 }

        func row(_ name: String) -> String {
            String(
                format: "| %@ | %d | %@ | %.0f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.0f | %.1f |", name, held,
                versions > 0 ? "\(versions)" : "–", deliveriesPerSecond,
                percentile(latencies, 0.5) * 1000, percentile(latencies, 0.99) * 1000,
                percentile(latencies, 0.999) * 1000, maximumLatency * 1000, serverCPUPerWrite * 1e6,
                clientCPUPerWrite * 1e6, Double(peakResident) / 1e6, stolen * 100)
        }
    }

    private func feed(diffcastAt path: String, access: ScopedAccess? = nil) throws -> Result {
        let server = try ServerProcess.diffcastd(socketPath: path, arguments: access?.arguments ?? [])
        defer { server.stop() }
        let prelude = access.map { Array("{\"op\":\"auth\",\"token\":\"\($0.token)\"}\n".utf8) } ?? []
        let setup = try UnixSocket(path: path)
        try setup.send(prelude + Array("apply feed {\"sections\":[{\"id\":\"s\"}]}\n".utf8))
        if access != nil { _ = setup.readLine() }
        _ = setup.readLine()
        var sockets: [UnixSocket] = []
        for _ in 0..<subscribers {
            let socket = try UnixSocket(path: path)
            if access != nil {
                try socket.send(prelude)
                _ = socket.readLine()
            }
            try socket.send(Array("subscribe feed\n".utf8))
            // The snapshot and the response.
            _ = socket.readLine()
            _ = socket.readLine()
            sockets.append(socket)
        }
        // Each changeset lists its items as `{"at":[…]`: count the pattern in the stream with
        // memmem, minding a pattern split across two reads (as cheap as the reader can be).
        let marker = Array("{\"at\":[".utf8)
        var tails = Array(repeating: [UInt8](), count: sockets.count)
        let result = try measure(server: server, path: path, sockets: sockets, prelude: prelude) { index in
            Array(
                "{\"op\":\"append_items\",\"collection\":\"feed\",\"items\":[{\"id\":\"f\(index)\",\"data\":{\"text\":\"\(Self.text)\"}}]}\n"
                    .utf8)
        } count: { subscriber, bytes in
            let seam = tails[subscriber] + bytes.prefix(marker.count - 1)
            var found = Self.occurrences(of: marker, in: seam[...])
            found += Self.occurrences(of: marker, in: bytes)
            tails[subscriber] = Array(bytes.suffix(marker.count - 1))
            return found
        }
        return result
    }

    private func feed(redisAt path: String) throws -> Result {
        let server = try ServerProcess.redis(socketPath: path)
        defer { server.stop() }
        let message: @Sendable (Int) -> String = { index in
            "{\"id\":\"f" + String(format: "%07d", index) + "\",\"data\":{\"text\":\"\(Self.text)\"}}"
        }
        let messageBytes =
            "*3\r\n$7\r\nmessage\r\n$4\r\nfeed\r\n$\(message(0).utf8.count)\r\n\(message(0))\r\n".utf8.count
        let reply = "*3\r\n$9\r\nsubscribe\r\n$4\r\nfeed\r\n:1\r\n".utf8.count
        var sockets: [UnixSocket] = []
        for _ in 0..<subscribers {
            let socket = try UnixSocket(path: path)
            try socket.send(Array("SUBSCRIBE feed\r\n".utf8))
            while socket.buffer.count - socket.bufferStart < reply {
                guard socket.fill() else { throw BenchmarkError("redis subscriber closed") }
            }
            sockets.append(socket)
        }
        var received = sockets.map { $0.buffer.count - $0.bufferStart - reply }
        return try measure(server: server, path: path, sockets: sockets) { index in
            let text = message(index)
            return Array("*3\r\n$7\r\nPUBLISH\r\n$4\r\nfeed\r\n$\(text.utf8.count)\r\n\(text)\r\n".utf8)
        } count: { subscriber, bytes in
            let before = received[subscriber] / messageBytes
            received[subscriber] += bytes.count
            return received[subscriber] / messageBytes - before
        }
    }

    /// Publishes `writes` writes with at most `window` unanswered, while one thread reads every
    /// subscriber; `count` says how many new items a read brought to a subscriber.
    private func measure(
        server: ServerProcess, path: String, sockets: [UnixSocket], prelude: [UInt8] = [],
        write: @escaping @Sendable (Int) -> [UInt8], count: (Int, ArraySlice<UInt8>) -> Int
    ) throws -> Result {
        let sampler = PipelineBenchmark.MemorySampler(server)
        let publisher = try UnixSocket(path: path)
        if !prelude.isEmpty {
            try publisher.send(prelude)
            _ = publisher.readLine()
        }
        let sent = Mutex<[ContinuousClock.Instant]>([])
        let lastVersion = Atomic<Int>(0)
        let writerDone = DispatchSemaphore(value: 0)
        sent.withLock { $0.reserveCapacity(writes) }
        let total = writes
        let window = window
        let serverCPU = server.cpuSeconds
        let clientCPU = cpuSecondsOfProcess("self")
        let machineCPU = MachineCPUTime.now()
        let began = ContinuousClock.now
        let writer = Thread {
            defer { writerDone.signal() }
            var acknowledged = 0
            var next = 0
            while acknowledged < total {
                if next < total && next - acknowledged < window {
                    var batch: [UInt8] = []
                    let end = min(total, acknowledged + window)
                    for index in next..<end { batch += write(index) }
                    let now = ContinuousClock.now
                    sent.withLock { $0.append(contentsOf: repeatElement(now, count: end - next)) }
                    try? publisher.send(batch)
                    next = end
                }
                guard let answer = publisher.readLine() else { return }
                acknowledged += 1
                if acknowledged == total, let version = integerField("version", in: answer) {
                    lastVersion.store(version, ordering: .relaxed)
                }
            }
        }
        writer.start()
        var seen = Array(repeating: 0, count: sockets.count)
        var latencies: [Double] = []
        latencies.reserveCapacity(writes * sockets.count)
        let expected = writes * sockets.count
        var delivered = 0
        var descriptors = sockets.map { pollfd(fd: $0.descriptor, events: Int16(POLLIN), revents: 0) }
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        // Bytes a subscriber already buffered while being set up count first.
        for (index, socket) in sockets.enumerated() where socket.buffer.count > socket.bufferStart {
            let fresh = count(index, socket.buffer[socket.bufferStart...])
            seen[index] += fresh
            delivered += fresh
        }
        while delivered < expected {
            guard poll(&descriptors, nfds_t(descriptors.count), 5000) > 0 else {
                throw BenchmarkError("no delivery for 5 s (\(delivered) of \(expected))")
            }
            for index in descriptors.indices where descriptors[index].revents != 0 {
                let got = recv(descriptors[index].fd, &chunk, chunk.count, Int32(MSG_DONTWAIT))
                guard got > 0 else { continue }
                let fresh = count(index, chunk[..<got])
                guard fresh > 0 else { continue }
                let now = ContinuousClock.now
                let items = seen[index]..<(seen[index] + fresh)
                sent.withLock { times in
                    for item in items {
                        let (whole, fraction) = (now - times[item]).components
                        latencies.append(Double(whole) + Double(fraction) / 1e18)
                    }
                }
                seen[index] += fresh
                delivered += fresh
            }
        }
        let elapsed = seconds(since: began)
        let stolen = MachineCPUTime.now().stealShare(since: machineCPU)
        writerDone.wait()
        return Result(
            deliveriesPerSecond: Double(expected) / elapsed, latencies: latencies,
            versions: lastVersion.load(ordering: .relaxed),
            serverCPUPerWrite: (server.cpuSeconds - serverCPU) / Double(writes),
            clientCPUPerWrite: (cpuSecondsOfProcess("self") - clientCPU) / Double(writes), peakResident: sampler.stop(),
            held: writes, stolen: stolen)
    }

    /// Occurrences of `pattern`, not overlapping.
    private static func occurrences(of pattern: [UInt8], in bytes: ArraySlice<UInt8>) -> Int {
        var found = 0
        var next = bytes.startIndex
        while let hit = firstIndex(of: pattern, in: bytes, from: next) {
            found += 1
            next = hit + pattern.count
        }
        return found
    }
}

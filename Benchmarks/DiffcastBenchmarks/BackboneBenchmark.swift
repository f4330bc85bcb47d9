import ArgumentParser
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Daemons sharing collections through a 3-node NATS JetStream cluster (scripts/nats-cluster.sh),
/// against one daemon alone, in the same run: what a write's acknowledgement costs, how long an
/// owner's death leaves its collection unwritable, and fan-out spread over daemons.
struct BackboneBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backbone", abstract: "Daemons sharing collections through NATS JetStream, against one alone.")

    @Option(help: "Writes of the acknowledgement table (one at a time).")
    var writes = 2000

    @Option(help: "Owner kills of the failover table.")
    var failovers = 3

    @Option(help: "Lease of the failover table, in milliseconds.")
    var leaseMs = 1500

    @Option(help: "Subscribers of the fan-out table.")
    var subscribers = 1000

    @Option(help: "Writes of the fan-out table (one at a time, ~1 KB each).")
    var fanOutWrites = 200

    @Option(help: "First client port of the NATS cluster (it takes PORT…PORT+2, +100…, +200…).")
    var port = 24222

    func run() throws {
        raiseFileLimit()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("dc-backbone-\(getpid())").path
        mkdir(directory, 0o755)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let cluster = try NATSCluster(directory: directory + "/nats", port: port)
        defer { cluster.stop() }
        let backbone = ["--backbone", cluster.urls, "--backbone-lease-ms", "\(leaseMs)"]

        emit("## Backbone: write acknowledgement, \(writes) writes of ~100 B one at a time\n")
        emit("| path | writes/s | p50 (ms) | p99 (ms) | p50 / alone |")
        emit("|---|---:|---:|---:|---:|")
        let alone = try ServerProcess.diffcastd(socketPath: directory + "/alone.sock")
        let aloneLatencies = try acknowledgementLatencies(path: alone.socketPath, owner: alone.socketPath)
        alone.stop()
        let owner = try ServerProcess.diffcastd(socketPath: directory + "/d1.sock", arguments: backbone)
        let follower = try ServerProcess.diffcastd(socketPath: directory + "/d2.sock", arguments: backbone)
        let spare = try ServerProcess.diffcastd(socketPath: directory + "/d3.sock", arguments: backbone)
        let ownerLatencies = try acknowledgementLatencies(path: owner.socketPath, owner: owner.socketPath)
        let forwardedLatencies = try acknowledgementLatencies(path: follower.socketPath, owner: owner.socketPath)
        let baseline = percentile(aloneLatencies, 0.5)
        for (name, latencies) in [
            ("diffcastd alone (memory only)", aloneLatencies), ("backbone, written at the owner", ownerLatencies),
            ("backbone, forwarded by another daemon", forwardedLatencies),
        ] {
            emit(
                String(
                    format: "| %@ | %.0f | %.2f | %.2f | %.1f× |", name,
                    Double(latencies.count) / latencies.reduce(0, +),
                    percentile(latencies, 0.5) * 1000, percentile(latencies, 0.99) * 1000,
                    percentile(latencies, 0.5) / baseline))
        }

        emit(
            "\n## Backbone: fan-out, \(subscribers) subscribers, ~1 KB changesets, \(fanOutWrites) writes one at a time\n"
        )
        emit("| subscribers on | deliveries/s | p50 latency (ms) | p99 latency (ms) |")
        emit("|---|---:|---:|---:|")
        let daemons = [owner, follower, spare]
        for (name, over) in [("one daemon (the owner)", [owner]), ("three daemons", daemons)] {
            // Writes go to the first daemon, which thereby owns the collection.
            let result = try updateLatencies(
                publisherPath: over[0].socketPath, subscriberPaths: over.map(\.socketPath),
                collection: "fan-\(over.count)", subscribers: subscribers, writes: fanOutWrites)
            emit(
                String(
                    format: "| %@ | %.0f | %.2f | %.2f |", name, result.deliveriesPerSecond,
                    percentile(result.latencies, 0.5) * 1000, percentile(result.latencies, 0.99) * 1000))
        }
        for daemon in daemons { daemon.stop() }

        emit("\n## Backbone: failover, owner killed (kill -9), lease \(leaseMs) ms\n")
        emit("| trial | first acknowledged write after (s) | refusals meanwhile |")
        emit("|---|---:|---:|")
        let survivor = try ServerProcess.diffcastd(socketPath: directory + "/s.sock", arguments: backbone)
        defer { survivor.stop() }
        var times: [Double] = []
        for trial in 1...failovers {
            let doomed = try ServerProcess.diffcastd(socketPath: directory + "/f\(trial).sock", arguments: backbone)
            let (time, refusals) = try failover(owner: doomed, survivor: survivor, collection: "failover-\(trial)")
            times.append(time)
            emit(String(format: "| %d | %.2f | %d |", trial, time, refusals))
        }
        emit(String(format: "\nMedian failover: %.2f s with a %d ms lease.\n", median(times), leaseMs))
    }

    /// Seconds per acknowledged write sent to `path`, each after the last one's answer, to a new
    /// collection made through `owner` (which thereby owns it).
    private func acknowledgementLatencies(path: String, owner: String) throws -> [Double] {
        let collection = "ack-\(path.hashValue & 0xffff)"
        let setup = try UnixSocket(path: owner)
        try request(setup, "append_sections \(collection) {\"sections\":[{\"id\":\"s\",\"items\":[]}]}")
        setup.close()
        let socket = try UnixSocket(path: path)
        defer { socket.close() }
        let data = String(repeating: "x", count: 80)
        var latencies: [Double] = []
        for index in 0..<writes {
            let began = ContinuousClock.now
            try request(socket, "append_items \(collection) {\"items\":[{\"id\":\"i\(index)\",\"data\":\"\(data)\"}]}")
            latencies.append(seconds(since: began))
        }
        return latencies
    }

    @discardableResult
    private func request(_ socket: UnixSocket, _ line: String) throws -> ArraySlice<UInt8> {
        try socket.send(Array((line + "\n").utf8))
        guard let answer = socket.readLine() else { throw BenchmarkError("the daemon closed the connection") }
        guard answer.starts(with: Array("{\"ok\":true".utf8)) else {
            throw BenchmarkError("refused: \(String(decoding: answer, as: UTF8.self))")
        }
        return answer
    }

    /// Makes `owner` own `collection`, kills it, and writes through `survivor` every 10 ms until
    /// one write is acknowledged: seconds from the kill, and the refusals before.
    private func failover(owner: ServerProcess, survivor: ServerProcess, collection: String) throws -> (Double, Int) {
        let setup = try UnixSocket(path: owner.socketPath)
        try request(setup, "append_sections \(collection) {\"sections\":[{\"id\":\"s\",\"items\":[]}]}")
        setup.close()
        let writer = try UnixSocket(path: survivor.socketPath)
        defer { writer.close() }
        try request(writer, "append_items \(collection) {\"items\":[\"before\"]}")
        let killed = ContinuousClock.now
        owner.stop(signal: SIGKILL)
        var refusals = 0
        while true {
            do {
                try request(writer, "append_items \(collection) {\"items\":[\"after-\(refusals)\"]}")
                return (seconds(since: killed), refusals)
            } catch {
                refusals += 1
                guard seconds(since: killed) < 60 else { throw BenchmarkError("no failover within 60 s") }
                usleep(10_000)
            }
        }
    }
}

/// The 3-node cluster of scripts/nats-cluster.sh (run from the repository's root, as `make
/// bench` does).
struct NATSCluster {
    let directory: String
    let urls: String

    init(directory: String, port: Int) throws {
        self.directory = directory
        // system(3), not Process: the script leaves the servers running in the background.
        guard system("scripts/nats-cluster.sh start '\(directory)' \(port) >/dev/null") == 0 else {
            throw BenchmarkError("the NATS cluster did not start (scripts/nats-cluster.sh)")
        }
        urls = (0..<3).map { "nats://127.0.0.1:\(port + $0)" }.joined(separator: ",")
    }

    func stop() {
        _ = system("scripts/nats-cluster.sh stop '\(directory)'")
    }
}

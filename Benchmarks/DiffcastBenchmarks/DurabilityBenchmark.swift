import ArgumentParser
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// What durability costs: write throughput per sync policy, and restart time of a large state.
struct DurabilityBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "durability", abstract: "Throughput with --sync always vs never; restart time with 1M items.")

    @Option(help: "Writes per throughput run.")
    var writes = 20_000

    @Option(help: "Items of the restart measurement.")
    var restartItems = 1_000_000

    @Option(
        help:
            "Another diffcastd (e.g. the previous release) whose --sync always throughput is measured in the same run.")
    var baselineDaemon: String?

    func run() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("dc-durable-\(getpid())").path
        mkdir(directory, 0o755)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        emit("## Durability: \(writes) writes from 4 connections, each waiting for its ack (no pipelining)\n")
        emit("| state | writes/s | ratio to in-memory |")
        emit("|---|---:|---:|")
        let memory = try medianThroughput(directory, arguments: [])
        for (name, arguments) in [
            ("in memory", [String]()), ("--sync never", ["--state-dir", directory + "/never", "--sync", "never"]),
            ("--sync interval (100 ms)", ["--state-dir", directory + "/interval", "--sync", "interval"]),
            ("--sync always", ["--state-dir", directory + "/always", "--sync", "always"]),
        ] {
            let rate = name == "in memory" ? memory : try medianThroughput(directory, arguments: arguments)
            emit(String(format: "| %@ | %.0f | %.2f× |", name, rate, rate / memory))
        }
        if let baselineDaemon {
            // Alternating runs of both binaries, so drift of this noisy machine hits both alike.
            var current: [Double] = []
            var baseline: [Double] = []
            for run in 0..<3 {
                let arguments = ["--state-dir", directory + "/cmp\(run)", "--sync", "always"]
                current.append(try throughput(directory, arguments: arguments))
                baseline.append(
                    try throughput(
                        directory, arguments: ["--state-dir", directory + "/base\(run)", "--sync", "always"],
                        binary: baselineDaemon))
            }
            emit(
                String(
                    format: "| --sync always, %@ | %.0f | this build: %.0f (%.2f× the baseline) |", baselineDaemon,
                    baseline.median, current.median, current.median / baseline.median))
        }
        emit("\n## Restart with \(restartItems) items (32-byte data)\n")
        emit("| recovered from | restart until serving (s) |")
        emit("|---|---:|")
        let state = directory + "/restart"
        let path = directory + "/restart.sock"
        let arguments = ["--state-dir", state, "--max-line-bytes", "\(1 << 30)"]
        var server = try ServerProcess.diffcastd(socketPath: path, arguments: arguments)
        let client = try UnixSocket(path: path)
        var request = "apply big {\"sections\":[{\"id\":\"s\",\"items\":["
        for index in 0..<restartItems {
            if index > 0 { request += "," }
            request += "{\"id\":\"item-\(index)\",\"data\":\"" + String(format: "%030d", index) + "\"}"
        }
        request += "]}]}\n"
        try client.send(Array(request.utf8))
        guard let response = client.readLine(), integerField("version", in: response) == 1 else {
            throw BenchmarkError("the large apply was not acknowledged")
        }
        server.stop(signal: SIGKILL)
        var started = ContinuousClock.now
        server = try ServerProcess.diffcastd(socketPath: path, arguments: arguments)
        let fromLog = seconds(since: started)
        try expectItems(restartItems, at: path)
        emit(String(format: "| write-ahead log (after kill -9) | %.2f |", fromLog))
        server.stop(signal: SIGTERM)
        started = ContinuousClock.now
        server = try ServerProcess.diffcastd(socketPath: path, arguments: arguments)
        let fromCheckpoint = seconds(since: started)
        try expectItems(restartItems, at: path)
        emit(String(format: "| checkpoint (after a clean stop) | %.2f |", fromCheckpoint))
        server.stop()
        emit()
    }

    private func expectItems(_ count: Int, at path: String) throws {
        let client = try UnixSocket(path: path)
        try client.send(Array("list\n".utf8))
        guard let line = client.readLine(), integerField("items", in: line) == count else {
            throw BenchmarkError("the restarted daemon does not hold \(count) items")
        }
    }

    private func medianThroughput(_ directory: String, arguments: [String]) throws -> Double {
        var rates: [Double] = []
        for _ in 0..<3 { rates.append(try throughput(directory, arguments: arguments)) }
        return rates.median
    }

    private func throughput(_ directory: String, arguments: [String], binary: String? = nil) throws -> Double {
        let path = directory + "/t\(arguments.count)-\(arguments.last ?? "m").sock"
        let server = try ServerProcess.diffcastd(socketPath: path, arguments: arguments, binary: binary)
        defer { server.stop() }
        let setup = try UnixSocket(path: path)
        try setup.send(Array("apply t {\"sections\":[{\"id\":\"s\",\"items\":[\"a\",\"b\",\"c\",\"d\"]}]}\n".utf8))
        _ = setup.readLine()
        let connections = 4
        let perConnection = writes / connections
        let group = DispatchGroup()
        let began = ContinuousClock.now
        for connection in 0..<connections {
            let socket = try UnixSocket(path: path)
            let item = ["a", "b", "c", "d"][connection]
            DispatchQueue.global().async(group: group) {
                for index in 0..<perConnection {
                    try? socket.send(
                        Array("update_items t {\"items\":[{\"id\":\"\(item)\",\"data\":\(index)}]}\n".utf8))
                    _ = socket.readLine()
                }
            }
        }
        group.wait()
        return Double(perConnection * connections) / seconds(since: began)
    }
}

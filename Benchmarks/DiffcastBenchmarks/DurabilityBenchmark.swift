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

    func run() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("dc-durable-\(getpid())").path
        mkdir(directory, 0o755)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        emit("## Durability: \(writes) writes from 4 connections, each waiting for its ack (no pipelining)\n")
        emit("| state | writes/s | ratio to in-memory |")
        emit("|---|---:|---:|")
        let memory = try throughput(directory, arguments: [])
        for (name, arguments) in [
            ("in memory", [String]()), ("--sync never", ["--state-dir", directory + "/never", "--sync", "never"]),
            ("--sync interval (100 ms)", ["--state-dir", directory + "/interval", "--sync", "interval"]),
            ("--sync always", ["--state-dir", directory + "/always", "--sync", "always"]),
        ] {
            let rate = name == "in memory" ? memory : try throughput(directory, arguments: arguments)
            emit(String(format: "| %@ | %.0f | %.2f× |", name, rate, rate / memory))
        }
        emit("\n## Restart with \(restartItems) items (32-byte data)\n")
        emit("| recovered from | restart until serving (s) |")
        emit("|---|---:|")
        let state = directory + "/restart"
        let path = directory + "/restart.sock"
        var server = try ServerProcess.diffcastd(socketPath: path, arguments: ["--state-dir", state])
        let client = try UnixSocket(path: path)
        var request = "apply big {\"sections\":[{\"id\":\"s\",\"items\":["
        for index in 0..<restartItems {
            if index > 0 { request += "," }
            request += "{\"id\":\"item-\(index)\",\"data\":\"" + String(format: "%030d", index) + "\"}"
        }
        request += "]}]}\n"
        try client.send(Array(request.utf8))
        _ = client.readLine()
        server.stop(signal: SIGKILL)
        var started = ContinuousClock.now
        server = try ServerProcess.diffcastd(socketPath: path, arguments: ["--state-dir", state])
        emit(String(format: "| write-ahead log (after kill -9) | %.2f |", seconds(since: started)))
        server.stop(signal: SIGTERM)
        started = ContinuousClock.now
        server = try ServerProcess.diffcastd(socketPath: path, arguments: ["--state-dir", state])
        emit(String(format: "| checkpoint (after a clean stop) | %.2f |", seconds(since: started)))
        server.stop()
        emit()
    }

    private func throughput(_ directory: String, arguments: [String]) throws -> Double {
        let path = directory + "/t\(arguments.count)-\(arguments.last ?? "m").sock"
        let server = try ServerProcess.diffcastd(socketPath: path, arguments: arguments)
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

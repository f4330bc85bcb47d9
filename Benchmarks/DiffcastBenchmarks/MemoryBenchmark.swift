import ArgumentParser
import DiffcastCore
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// What the daemon holds per idle collection, and whether it gives it back after `drop`.
struct MemoryBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "memory", abstract: "Resident memory per idle one-item collection, and after dropping them.")

    @Option(help: "One-item collections created.")
    var collections = 100_000

    func run() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("dc-memory-\(getpid())").path
        mkdir(directory, 0o755)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let server = try ServerProcess.diffcastd(socketPath: directory + "/d.sock")
        defer { server.stop() }
        let client = try UnixSocket(path: directory + "/d.sock")
        try roundTrip(client, ["ping"])
        usleep(100_000)
        let empty = server.residentBytes
        try roundTrip(
            client,
            (0..<collections).map {
                "{\"op\":\"apply\",\"collection\":\"c\($0)\",\"sections\":[{\"id\":\"s\",\"items\":[\"i\"]}]}"
            })
        usleep(100_000)
        let full = server.residentBytes
        try roundTrip(client, (0..<collections).map { "{\"op\":\"drop\",\"collection\":\"c\($0)\"}" })
        usleep(300_000)
        let dropped = server.residentBytes
        let inProcess = documentBytes()
        emit("## Memory per idle collection: \(collections) collections of one section and one item\n")
        emit("In this process, \(collections) `Document`s alone: \(inProcess) bytes each.\n")
        emit("| daemon RSS empty (MB) | with the collections (MB) | per collection (bytes) | after dropping all (MB) |")
        emit("|---:|---:|---:|---:|")
        emit(
            String(
                format: "| %.1f | %.1f | %.0f | %.1f |\n", Double(empty) / 1e6, Double(full) / 1e6,
                Double(full - empty) / Double(collections), Double(dropped) / 1e6))
    }

    /// Resident bytes per one-item `Document` built in this process (no daemon around it).
    private func documentBytes() -> Int {
        let before = residentBytesOfThisProcess()
        var documents: [Document] = []
        documents.reserveCapacity(collections)
        for _ in 0..<collections {
            var document = Document()
            try? document.apply(.apply(sections: [SectionInput(id: "s", items: [Item(id: "i")])]))
            _ = document.changeset(since: Snapshot())
            documents.append(document)
        }
        let after = residentBytesOfThisProcess()
        return (after - before) / max(1, documents.count)
    }

    /// Sends the lines pipelined and waits for every answer.
    private func roundTrip(_ socket: UnixSocket, _ lines: [String]) throws {
        for start in stride(from: 0, to: lines.count, by: 1000) {
            let slice = lines[start..<min(lines.count, start + 1000)]
            try socket.send(Array((slice.joined(separator: "\n") + "\n").utf8))
            for _ in slice {
                guard socket.readLine() != nil else { throw BenchmarkError("the daemon closed the connection") }
            }
        }
    }
}

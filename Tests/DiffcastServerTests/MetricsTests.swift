import DiffcastTestDaemon
import DiffcastWire
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `--metrics HOST:PORT` serves Prometheus text that follows what the daemon did.
@Suite(.serialized) struct MetricsTests {
    /// One HTTP/1.1 request over a fresh TCP connection; the whole answer (the server closes, as
    /// the request asks).
    private func fetch(port: Int, path: String) throws -> String {
        let descriptor = try connectTCP(port: port)
        defer { close(descriptor) }
        let request = Array("GET \(path) HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".utf8)
        _ = request.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var answer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = recv(descriptor, &chunk, chunk.count, 0)
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { break }
            answer.append(contentsOf: chunk[..<count])
        }
        return String(decoding: answer, as: UTF8.self)
    }

    /// The value of a sample line `name value` (no labels).
    private func sample(_ name: String, in text: String) -> Double? {
        text.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.split(separator: " ")[1]) }
    }

    @Test func metricsFollowWhatTheDaemonDid() throws {
        // A random port may be taken by another process: a daemon that cannot listen exits, and
        // another port is tried.
        var started: (daemon: Daemon, port: Int)?
        for _ in 0..<8 where started == nil {
            let port = Int.random(in: 20_000..<32_000)
            if let daemon = try? Daemon(arguments: ["--metrics", "127.0.0.1:\(port)"]) { started = (daemon, port) }
        }
        let (daemon, port) = try #require(started, "no free port for the metrics listener in 8 tries")
        let subscriber = try Client(path: daemon.socketPath)
        _ = try subscriber.request("subscribe m")
        let writer = try Client(path: daemon.socketPath)
        #expect(try writer.request(#"append_sections m {"sections":[{"id":"s"}]}"#).isOK)
        #expect(try writer.request(#"append_items m {"items":["a"]}"#).isOK)
        #expect(try writer.request(#"append_items m {"items":["a"]}"#)["error"] != nil)
        let text = try fetch(port: port, path: "/metrics")
        #expect(text.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(sample("diffcast_writes_applied_total", in: text) == 2, "\(text)")
        #expect(sample("diffcast_writes_rejected_total", in: text) == 1)
        #expect(sample("diffcast_versions_published_total", in: text) == 2)
        #expect(sample("diffcast_connections", in: text) == 2)
        #expect(sample("diffcast_subscriptions", in: text) == 1)
        #expect(sample("diffcast_collections", in: text) == 1)
        #expect((sample("diffcast_events_queued_total", in: text) ?? 0) >= 3)
        // What `stats` counts, /metrics counts too (read after it, so both count the `stats`).
        let stats = try writer.request("stats")
        let after = try fetch(port: port, path: "/metrics")
        #expect(sample("diffcast_requests_total", in: after).map { Int($0) } == stats["requests"]?.int)
        #expect(sample("diffcast_apply_batches_total", in: after).map { Int($0) } == stats["apply_batches"]?.int)
        #expect(stats["requests"]?.int == 5)
        #expect(text.contains("diffcast_apply_batch_seconds_bucket{le=\""))
        #expect(text.contains("diffcast_write_ack_seconds_count 3"))
        #expect(try fetch(port: port, path: "/other").hasPrefix("HTTP/1.1 404"))
        _ = daemon
    }
}

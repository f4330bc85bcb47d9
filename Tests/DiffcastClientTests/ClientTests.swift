import DiffcastClient
import DiffcastTestDaemon
import Foundation
import Testing

/// The client library against the real daemon.
@Suite(.serialized) struct ClientTests {
    @Test func pipelinedRequestsAreAnsweredInOrderAndEventsArrive() async throws {
        let daemon = try Daemon()
        let connection = try await DaemonConnection.connect(to: .unix(path: daemon.socketPath))
        try await connection.call(["op": "subscribe", "collection": "c"])
        try await connection.call(["op": "append_sections", "collection": "c", "sections": [["id": "s"]]])
        let requests: [JSONValue] = (0..<500).map { n in
            ["op": "append_items", "collection": "c", "items": [.string("i\(n)")], "id": .number(String(n))]
        }
        let responses = try await connection.pipeline(requests)
        #expect(responses.map { $0["id"] } == (0..<500).map { JSONValue.number(String($0)) })
        #expect(responses.allSatisfy { $0["ok"] == .bool(true) })
        var mirror = CollectionMirror()
        for await event in connection.events {
            try mirror.feed(event)
            if mirror.version == responses.last?["version"]?.int.map(UInt64.init) { break }
        }
        #expect(mirror.sections.first?.items.map(\.id.text) == (0..<500).map { "i\($0)" })
    }

    @Test func anErrorResponseIsThrownWithItsCode() async throws {
        let daemon = try Daemon()
        let connection = try await DaemonConnection.connect(to: .unix(path: daemon.socketPath))
        await #expect(throws: ClientError.response(code: "unknown_collection", message: "unknown collection 'nothing'"))
        {
            try await connection.call(["op": "get", "collection": "nothing"])
        }
        let raw = try await connection.request(["op": "get", "collection": "nothing"])
        #expect(raw["ok"] == .bool(false))
    }

    @Test func aMissingDaemonSaysWhereAndWhy() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("no-\(UUID()).sock").path
        let error = await #expect(throws: ClientError.self) {
            try await DaemonConnection.connect(to: .unix(path: path))
        }
        guard case .cannotConnect(let endpoint, let cause) = error else {
            Issue.record("not cannotConnect: \(String(describing: error))")
            return
        }
        #expect(endpoint == path)
        #expect(cause.contains("is diffcastd running"))
    }

    @Test func aClosedConnectionFailsWhatWaits() async throws {
        let daemon = try Daemon()
        let connection = try await DaemonConnection.connect(to: .unix(path: daemon.socketPath))
        _ = daemon.stop(signal: SIGKILL)
        await #expect(throws: ClientError.self) { try await connection.call(["op": "ping"]) }
        var count = 0
        for await _ in connection.events { count += 1 }
        #expect(count == 0)
    }

    @Test func aFollowerResumesAcrossARestartWithOneChangeset() async throws {
        let state = FileManager.default.temporaryDirectory.appendingPathComponent("dc-state-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: state) }
        // The socket outside both daemons' folders: the first one's folder goes when it does.
        let socket = state + ".sock"
        defer { unlink(socket) }
        var daemon = try Daemon(arguments: ["--state-dir", state], socketPath: socket)
        let writer = try Client(path: socket)
        #expect(try writer.request(#"apply c {"sections":[{"id":"s","items":["a"]}]}"#).isOK)
        let follower = Follower(endpoint: .unix(path: socket), collections: ["c"], maximumBackoff: .milliseconds(100))
        var updates = follower.updates().makeAsyncIterator()
        var kinds: [String] = []
        func next() async throws -> Follower.Update? {
            guard let update = try await updates.next() else { return nil }
            switch update.change {
            case .snapshot: kinds.append("snapshot")
            case .changed: kinds.append("changeset")
            case .disconnected: kinds.append("disconnected")
            case .subscribed: kinds.append("subscribed")
            case .diverged: kinds.append("diverged")
            case .dropped: kinds.append("dropped")
            }
            return update
        }
        while try await next()?.mirror.version != 1 {}
        writer.close()
        _ = daemon.stop(signal: SIGKILL)
        daemon = try Daemon(arguments: ["--state-dir", state], socketPath: socket)
        let second = try Client(path: socket)
        #expect(try second.request(#"append_items c {"items":["b"]}"#).isOK)
        var last: Follower.Update?
        while last?.mirror.version != 2 { last = try await next() }
        #expect(last?.mirror.sections.first?.items.map(\.id.text) == ["a", "b"])
        #expect(kinds.filter { $0 == "snapshot" }.count == 1)
        #expect(kinds.contains("disconnected"))
        #expect(!kinds.contains("diverged"))
        let state2 = try second.request("get c")
        #expect(state2["digest"] == .string(Digest(of: last?.mirror.snapshot ?? Snapshot()).description))
    }
}

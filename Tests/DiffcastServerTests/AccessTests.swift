import DiffcastTestDaemon
import DiffcastWire
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Limits and access control, through the real daemon.
@Suite(.serialized) struct AccessTests {
    @Test func eachLimitAnswersLimitExceededNamingIt() throws {
        let daemon = try Daemon(arguments: [
            "--max-collections", "2", "--max-items-per-collection", "3", "--max-connections", "2",
        ])
        let client = try Client(path: daemon.socketPath)
        #expect(try client.request(#"apply a {"sections":[{"id":"s","items":["1","2"]}]}"#).isOK)
        #expect(try client.request(#"apply b {"sections":[]}"#).isOK)
        let third = try client.request(#"apply c {"sections":[]}"#)
        #expect(third["error"]?["code"] == .string("limit_exceeded"))
        #expect(third["error"]?["message"]?.string?.contains("max_collections") == true)
        let tooMany = try client.request(#"append_items a {"items":["3","4"]}"#)
        #expect(tooMany["error"]?["message"]?.string?.contains("max_items_per_collection") == true)
        #expect(try client.request("get a")["sections"]?.array.first?["items"]?.array.count == 2)
        #expect(try client.request(#"append_items a {"items":["3"]}"#).isOK)
        let second = try Client(path: daemon.socketPath)
        #expect(try second.request("ping").isOK)
        let third2 = try Client(path: daemon.socketPath)
        let refusal = try third2.readLine()
        #expect(refusal?["error"]?["message"]?.string?.contains("max_connections") == true)
        #expect(try third2.readLine() == nil)
    }

    @Test(.enabled(if: getuid() == 0 && FileManager.default.fileExists(atPath: "/usr/bin/setpriv")))
    func aPublisherWhoseUIDIsNotAllowedIsUnauthorized() throws {
        let daemon = try Daemon(arguments: ["--publishers", "uid:4242"])
        chmod(daemon.socketPath, 0o666)
        chmod(daemon.directory.path, 0o755)
        let responses = try Self.responsesToNobody(
            ["append_sections x {\"sections\":[{\"id\":\"s\"}]}", "subscribe x", "ping"], on: daemon)
        #expect(responses[0]["error"]?["code"] == .string("unauthorized"))
        #expect(responses[0]["error"]?["message"]?.string?.contains("uid 65534") == true)
        // Subscribing is open to everyone here, but only a publisher creates a collection by it.
        #expect(responses[1]["error"]?["code"] == .string("unknown_collection"))
        #expect(responses[2].isOK)
        #expect(try Client(path: daemon.socketPath).request("list")["collections"] == .array([]))
        // Root, and the listed uid, may publish.
        #expect(try Client(path: daemon.socketPath).request(#"append_sections x {"sections":[{"id":"s"}]}"#).isOK)
    }

    /// A list that names a group lets in a peer whose process runs in it, whatever its user
    /// (here uid 4244, which has no account, so the group can come only from the peer's
    /// credentials); the same user in another group is refused.
    @Test(.enabled(if: getuid() == 0 && FileManager.default.fileExists(atPath: "/usr/bin/setpriv")))
    func aPublisherIsAllowedByItsGroup() throws {
        let daemon = try Daemon(arguments: ["--publishers", "gid:4243"])
        chmod(daemon.socketPath, 0o666)
        chmod(daemon.directory.path, 0o755)
        func errorCodeOfAWrite(inGroup group: UInt32) throws -> String? {
            let netcat = try NetcatSession(socketPath: daemon.socketPath, asUser: 4244, group: group, options: ["-N"])
            netcat.send(#"append_sections x {"sections":[{"id":"s\#(group)"}]}"# + "\n")
            try netcat.closeInput()
            return try Self.errorCodeOfNextAnswer(from: netcat)
        }
        #expect(try errorCodeOfAWrite(inGroup: 4244) == "unauthorized")
        #expect(try errorCodeOfAWrite(inGroup: 4243) == nil)
        #expect(try Client(path: daemon.socketPath).request("get x")["sections"]?.array.count == 1)
    }

    /// A reload (SIGHUP) applies the lists to connections already open, not only to new ones:
    /// uid 65534 is refused, allowed on the same connection after one reload, refused after
    /// another.
    @Test(.enabled(if: getuid() == 0 && FileManager.default.fileExists(atPath: "/usr/bin/setpriv")))
    func aReloadedListAppliesToConnectionsAlreadyOpen() throws {
        let open = try OpenConnectionUnderReloads(publishers: "uid:4242", user: 65534)
        #expect(try open.errorCodeOfAWrite() == "unauthorized")
        try open.reload(publishers: "uid:65534")
        try waitUntil("the reloaded list lets the open connection write") { try open.errorCodeOfAWrite() == nil }
        try open.reload(publishers: "uid:4242")
        try waitUntil("the reloaded list refuses the open connection again") {
            try open.errorCodeOfAWrite() == "unauthorized"
        }
        #expect(open.daemon.stop() == 0)
    }

    /// A reload that names the peer's group lets a connection already open write: the groups
    /// are looked up for the reload, not only at connect.
    @Test(.enabled(if: getuid() == 0 && FileManager.default.fileExists(atPath: "/usr/bin/setpriv")))
    func aReloadedGroupListAppliesToConnectionsAlreadyOpen() throws {
        let open = try OpenConnectionUnderReloads(publishers: "uid:4242", user: 4244, group: 4243)
        #expect(try open.errorCodeOfAWrite() == "unauthorized")
        try open.reload(publishers: "gid:4243")
        try waitUntil("the reloaded group list lets the open connection write") { try open.errorCodeOfAWrite() == nil }
        #expect(open.daemon.stop() == 0)
    }

    /// A daemon whose publishers list comes from a file, and one connection open to it as
    /// another user (`nc` under `setpriv`), whose writes are answered as reloads change the list.
    final class OpenConnectionUnderReloads {
        let file: URL
        let daemon: Daemon
        let netcat: NetcatSession
        private var attempt = 0

        init(publishers: String, user: UInt32, group: UInt32? = nil) throws {
            file = FileManager.default.temporaryDirectory.appendingPathComponent(
                "dc-access-\(getpid())-\(user).yaml")
            try "publishers: [\"\(publishers)\"]\n".write(to: file, atomically: true, encoding: .utf8)
            daemon = try Daemon(arguments: ["--config", file.path])
            chmod(daemon.socketPath, 0o666)
            chmod(daemon.directory.path, 0o755)
            netcat = try NetcatSession(socketPath: daemon.socketPath, asUser: user, group: group)
        }

        deinit { try? FileManager.default.removeItem(at: file) }

        /// Rewrites the list and has the daemon reload it (SIGHUP).
        func reload(publishers: String) throws {
            try "publishers: [\"\(publishers)\"]\n".write(to: file, atomically: true, encoding: .utf8)
            kill(daemon.pid, SIGHUP)
        }

        /// Writes a new section on the open connection: the error code of its answer, nil if none.
        func errorCodeOfAWrite() throws -> String? {
            attempt += 1
            netcat.send(#"append_sections x {"sections":[{"id":"s\#(attempt)"}]}"# + "\n")
            return try AccessTests.errorCodeOfNextAnswer(from: netcat)
        }
    }

    /// The error code of the next answer `nc` prints (events skipped), nil for a success.
    static func errorCodeOfNextAnswer(from netcat: NetcatSession) throws -> String? {
        while true {
            let response = try netcat.reader.next()
            if response["ok"] != nil { return response["error"]?["code"]?.string }
        }
    }

    /// The responses (events left out) to `lines` sent with `nc -U` by uid 65534, a peer that
    /// no list names.
    static func responsesToNobody(_ lines: [String], on daemon: Daemon) throws -> [JSONValue] {
        let netcat = try NetcatSession(socketPath: daemon.socketPath, asUser: 65534, options: ["-N"])
        netcat.send(lines.map { $0 + "\n" }.joined())
        try netcat.closeInput()
        var responses: [JSONValue] = []
        while responses.count < lines.count {
            let line = try netcat.reader.next()
            if line["ok"] != nil { responses.append(line) }
        }
        return responses
    }

    /// One request line per op, and the list that governs it (nil: open to every peer).
    static let everyOp: [(line: String, list: String?)] = [
        ("ping", nil), ("unsubscribe x", "subscribers"), (#"window x {"window":{"first":1}}"#, "subscribers"),
        ("get x", "subscribers"), ("subscribe x", "subscribers"), ("list", "subscribers"), ("stats", "subscribers"),
        (#"apply x {"sections":[{"id":"s","items":["a"]}]}"#, "publishers"),
        (#"append_sections x {"sections":[{"id":"t"}]}"#, "publishers"),
        (#"insert_sections x {"sections":[{"id":"u"}],"before":"s"}"#, "publishers"),
        (#"delete_sections x {"sections":["u"]}"#, "publishers"),
        (#"move_section x {"section":"t","before":"s"}"#, "publishers"),
        (#"reload_sections x {"sections":["s"]}"#, "publishers"),
        (#"update_sections x {"sections":[{"id":"s","data":1}]}"#, "publishers"),
        (#"append_items x {"items":["b"]}"#, "publishers"),
        (#"insert_items x {"items":["c"],"before":"a"}"#, "publishers"),
        (#"delete_items x {"items":["c"]}"#, "publishers"),
        (#"move_item x {"item":"b","before":"a"}"#, "publishers"),
        (#"reload_items x {"items":["a"]}"#, "publishers"),
        (#"reconfigure_items x {"items":["a"]}"#, "publishers"),
        (#"update_items x {"items":[{"id":"a","data":2}]}"#, "publishers"),
        (#"batch x {"ops":[{"op":"append_items","items":["d"]}]}"#, "publishers"),
        ("delete_all x", "publishers"), ("drop x", "publishers"),
    ]

    /// Every op, sent by a peer that a list leaves out (uid 65534), is refused exactly when its
    /// list is restricted — for each list alone and both together — and a refused op changes
    /// nothing.
    @Test(
        .enabled(if: getuid() == 0 && FileManager.default.fileExists(atPath: "/usr/bin/setpriv")),
        arguments: [["publishers"], ["subscribers"], ["publishers", "subscribers"]])
    func everyOpIsRefusedExactlyByItsList(restricted: [String]) throws {
        let daemon = try Daemon(arguments: restricted.flatMap { ["--\($0)", "uid:4242"] })
        chmod(daemon.socketPath, 0o666)
        chmod(daemon.directory.path, 0o755)
        #expect(try Client(path: daemon.socketPath).request(#"apply x {"sections":[{"id":"s","items":["a"]}]}"#).isOK)
        let before = try Client(path: daemon.socketPath).request("get x")
        let responses = try Self.responsesToNobody(Self.everyOp.map(\.line), on: daemon)
        for ((line, list), response) in zip(Self.everyOp, responses) {
            let refused = response["error"]?["code"] == .string("unauthorized")
            let shouldBe = list.map { restricted.contains($0) } ?? false
            #expect(refused == shouldBe, "\(restricted): \(line) -> \(response.canonicalText)")
            if refused {
                #expect(response["error"]?["message"]?.string?.contains("uid 65534") == true, "\(line)")
            }
        }
        if restricted.contains("publishers") {
            let after = try Client(path: daemon.socketPath).request("get x")
            #expect(after["version"] == before["version"] && after["digest"] == before["digest"])
        }
    }

    /// A TCP connection to 127.0.0.1:port with a request helper.
    private final class TCPClient {
        let stream: FileHandle
        let reader: LineReader

        init(port: Int) throws {
            stream = FileHandle(fileDescriptor: try connectTCP(port: port), closeOnDealloc: true)
            reader = LineReader(stream)
        }

        func request(_ line: String) throws -> JSONValue {
            stream.write(Data((line + "\n").utf8))
            return try reader.next()
        }
    }

    @Test func aTCPClientDoesAnythingOnlyAfterPresentingTheToken() throws {
        let (daemon, port) = try tokenProtectedDaemon()
        let client = try TCPClient(port: port)
        #expect(try client.request("ping").isOK)
        for (line, _) in Self.everyOp where line != "ping" {
            #expect(try client.request(line)["error"]?["code"] == .string("unauthorized"), "\(line)")
        }
        #expect(try client.request(#"{"op":"auth","token":"wrong"}"#)["error"]?["code"] == .string("unauthorized"))
        #expect(try client.request(#"{"op":"auth","token":"s3cret"}"#).isOK)
        // The refused requests created nothing.
        #expect(try client.request("list")["collections"] == .array([]))
        #expect(try client.request(#"append_sections t {"sections":[{"id":"s"}]}"#)["version"]?.int == 1)
        _ = daemon
    }

    @Test func aTCPClientGuessingTokensIsCutOff() throws {
        let (daemon, port) = try tokenProtectedDaemon()
        let client = try TCPClient(port: port)
        // 2,000 guesses in one write: three are answered, then the daemon closes the connection.
        let guesses = (0..<2000).map { #"{"op":"auth","token":"guess\#($0)"}"# + "\n" }.joined()
        client.stream.write(Data(guesses.utf8))
        var answers = 0
        while let line = try? client.reader.next() {
            #expect(line["error"]?["code"] == .string("unauthorized"))
            answers += 1
        }
        #expect(answers == 3)
        #expect(try TCPClient(port: port).request("ping").isOK, "the daemon goes on serving others")
        _ = daemon
    }

    /// A daemon with a TCP listener (token `s3cret`) that already accepts connections: the
    /// Unix socket can be ready first, and a random port can be taken (ports are drawn below
    /// Linux's ephemeral range, 32768 up, where outgoing connections take theirs), so try a few.
    private func tokenProtectedDaemon() throws -> (Daemon, Int) {
        for _ in 0..<5 {
            let port = Int.random(in: 20_000..<32_000)
            let daemon = try Daemon(arguments: ["--tcp", "127.0.0.1:\(port)", "--tcp-token", "s3cret"])
            let listening =
                (try? waitUntil("the TCP listener on \(port)", timeout: 5) {
                    guard daemon.process.isRunning else { return true }
                    guard let descriptor = try? connectTCP(port: port) else { return false }
                    close(descriptor)
                    return true
                }) != nil
            if listening && daemon.process.isRunning { return (daemon, port) }
        }
        throw HarnessError.failed("no daemon with a TCP listener after 5 ports")
    }

    @Test func listeningBeyondLoopbackWithoutATokenIsRefusedAtStart() throws {
        let port = Int.random(in: 20_000..<32_000)
        let daemon = try Daemon(arguments: ["--tcp", "0.0.0.0:\(port)"], waitForSocket: false)
        #expect(daemon.exitStatus() > 0)
        #expect(daemon.log().contains("tcp_token"), "\(daemon.log())")
    }
}

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
        let netcat = Process()
        netcat.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        netcat.arguments = ["--reuid=65534", "--regid=65534", "--clear-groups", "nc", "-U", "-N", daemon.socketPath]
        let input = Pipe()
        let output = Pipe()
        netcat.standardInput = input
        netcat.standardOutput = output
        try netcat.run()
        input.fileHandleForWriting.write(
            Data("append_sections x {\"sections\":[{\"id\":\"s\"}]}\nsubscribe x\nping\n".utf8))
        try input.fileHandleForWriting.close()
        let reader = LineReader(output.fileHandleForReading)
        var lines: [JSONValue] = []
        while lines.filter({ $0["ok"] != nil }).count < 3 { lines.append(try reader.next()) }
        netcat.waitUntilExit()
        let responses = lines.filter { $0["ok"] != nil }
        #expect(responses[0]["error"]?["code"] == .string("unauthorized"))
        #expect(responses[0]["error"]?["message"]?.string?.contains("uid 65534") == true)
        #expect(responses[1].isOK, "subscribing is open to everyone here")
        #expect(responses[2].isOK)
        // Root, and the listed uid, may publish.
        #expect(try Client(path: daemon.socketPath).request(#"append_sections x {"sections":[{"id":"s"}]}"#).isOK)
    }

    @Test func aTCPClientWritesOnlyAfterPresentingTheToken() throws {
        let port = Int.random(in: 20_000..<60_000)
        let daemon = try Daemon(arguments: ["--tcp", "127.0.0.1:\(port)", "--tcp-token", "s3cret"])
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        #expect(connected == 0)
        let stream = FileHandle(fileDescriptor: dup(descriptor), closeOnDealloc: true)
        let reader = LineReader(stream)
        func request(_ line: String) throws -> JSONValue {
            stream.write(Data((line + "\n").utf8))
            return try reader.next()
        }
        #expect(
            try request(#"append_sections t {"sections":[{"id":"s"}]}"#)["error"]?["code"] == .string("unauthorized"))
        #expect(try request(#"{"op":"auth","token":"wrong"}"#)["error"]?["code"] == .string("unauthorized"))
        #expect(try request(#"{"op":"auth","token":"s3cret"}"#).isOK)
        #expect(try request(#"append_sections t {"sections":[{"id":"s"}]}"#)["version"]?.int == 1)
        _ = daemon
    }
}

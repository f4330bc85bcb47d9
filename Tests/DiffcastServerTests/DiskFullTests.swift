import DiffcastClient
import DiffcastCore
import DiffcastTestDaemon
import DiffcastWire
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A small tmpfs as the state directory's disk, to fill on demand (mounting needs root).
private final class SmallDisk {
    let path: String

    /// Mounts a tmpfs of `bytes`, or returns nil where mounting is refused.
    init?(bytes: Int) {
        path =
            FileManager.default.temporaryDirectory.appendingPathComponent("dc-disk-\(UUID().uuidString.prefix(8))")
            .path
        guard (try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)) != nil,
            Self.run(["/bin/mount", "-t", "tmpfs", "-o", "size=\(bytes)", "tmpfs", path]) == 0
        else { return nil }
    }

    static let canMount: Bool = SmallDisk(bytes: 64 * 1024) != nil

    deinit {
        _ = Self.run(["/bin/umount", "-l", path])
        try? FileManager.default.removeItem(atPath: path)
    }

    @discardableResult
    static func run(_ command: [String]) -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        process.standardError = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return -1 }
        return process.exitStatus() ?? -1
    }
}

/// A full disk is answered `unavailable`, changes nothing, and the daemon goes on serving reads
/// and subscribers; once space returns, writes are taken again; a restart brings back exactly
/// what was acknowledged.
@Suite(.serialized, .enabled(if: SmallDisk.canMount, "mounting a tmpfs needs root; skipped"))
struct DiskFullTests {
    @Test func aFullDiskIsReadOnlyNotACrash() throws {
        guard let disk = SmallDisk(bytes: 1 << 20) else {
            Issue.record("cannot mount a tmpfs")
            return
        }
        let state = disk.path + "/state"
        let filler = disk.path + "/filler"
        _ = FileManager.default.createFile(atPath: filler, contents: Data(count: 256 * 1024))
        let socketPath = disk.path + ".sock"
        var daemon = try Daemon(arguments: ["--state-dir", state, "--sync", "always"], socketPath: socketPath)
        let writer = try Client(path: socketPath)
        let subscriber = try Client(path: socketPath)
        #expect(try writer.request(#"append_sections full {"sections":[{"id":"s"}]}"#).isOK)
        _ = try subscriber.request("subscribe full")
        var mirror = CollectionMirror()
        try mirror.feed(try subscriber.event())
        let blob = String(repeating: "d", count: 4000)
        var acknowledged: [String] = []
        var refusal: JSONValue?
        for index in 0..<1000 {
            let response = try writer.request(#"append_items full {"items":[{"id":"k\#(index)","data":"\#(blob)"}]}"#)
            if response.isOK {
                acknowledged.append("k\(index)")
            } else {
                refusal = response
                break
            }
        }
        #expect(refusal?["error"]?["code"] == .string("unavailable"), "\(refusal?.canonicalText ?? "never full")")
        #expect(acknowledged.count > 10, "the disk filled before anything was written")
        // Reads and subscribers go on, from the last durable state.
        let got = try writer.request("get full")
        #expect(got["sections"]?.array.first?["items"]?.array.count == acknowledged.count)
        while (mirror.version ?? 0) < UInt64(got["version"]?.int ?? 0) { try mirror.feed(try subscriber.event()) }
        #expect(Digest(of: mirror.snapshot).description == got["digest"]?.string)
        let stats = try writer.request("stats")
        #expect(stats["read_only"] == .bool(true))
        #expect(
            try writer.request(#"update_items full {"items":[{"id":"k0","data":1}]}"#)["error"]?["code"]
                == .string("unavailable"))
        // Space comes back: writes are taken again.
        try FileManager.default.removeItem(atPath: filler)
        try waitUntil("writes are taken again") { try writer.request("stats")["read_only"] == .bool(false) }
        let after = try writer.request(#"append_items full {"items":["after"]}"#)
        #expect(after.isOK, "\(after.canonicalText)")
        acknowledged.append("after")
        while (mirror.version ?? 0) < UInt64(after["version"]?.int ?? 0) { try mirror.feed(try subscriber.event()) }
        #expect(mirror.sections.first?.items.map(\.id.text) == acknowledged)
        // A crash and restart bring back exactly what was acknowledged.
        _ = daemon.stop(signal: SIGKILL)
        daemon = try Daemon(arguments: ["--state-dir", state], socketPath: socketPath)
        let recovered = try Client(path: socketPath).request("get full")
        let ids = recovered["sections"]?.array.first?["items"]?.array.map { $0.string ?? $0["id"]?.string ?? "?" }
        #expect(ids == acknowledged)
        _ = daemon.stop()
    }
}

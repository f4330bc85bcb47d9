import DiffcastClient
import DiffcastCore
import DiffcastTestDaemon
import DiffcastTestSupport
import DiffcastWire
import Foundation
import Logging
import Testing

@testable import DiffcastEngine
@testable import DiffcastStorage

#if canImport(Glibc)
    import Glibc
#endif

/// Acknowledged writes survive `kill -9`: the real daemon, several writers, random kill moments.
@Suite(.serialized) struct DurabilityTests {
    /// What writers sent and what the daemon acknowledged, per writer, in order.
    final class Ledger: Sendable {
        let sent = Locked<[[String]]>([])
        let acknowledged = Locked<[[String]]>([])
        let lastVersion = Locked<Int>(0)

        init(writers: Int) {
            sent.withLock { $0 = Array(repeating: [], count: writers) }
            acknowledged.withLock { $0 = Array(repeating: [], count: writers) }
        }
    }

    static func cycles() -> Int {
        Int(ProcessInfo.processInfo.environment["DIFFCAST_CRASH_CYCLES"] ?? "") ?? 20
    }

    @Test func acknowledgedWritesSurviveKillNine() throws {
        let stateDirectory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "dc-crash-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: stateDirectory) }
        let socketPath = stateDirectory.path + ".sock"
        let writers = 3
        let ledger = Ledger(writers: writers)
        var epoch: String?
        // A small log limit folds the log into checkpoints again and again during the cycles.
        let arguments = ["--state-dir", stateDirectory.path, "--checkpoint-log-bytes", "16384"]
        var daemon = try Daemon(arguments: arguments, socketPath: socketPath)
        let setup = try Client(path: socketPath)
        #expect(try setup.request(#"append_sections crash {"sections":[{"id":"w0"},{"id":"w1"},{"id":"w2"}]}"#).isOK)
        var rng = SystemRandomNumberGenerator()
        for cycle in 0..<Self.cycles() {
            let group = DispatchGroup()
            for writer in 0..<writers {
                DispatchQueue.global().async(group: group) {
                    Self.write(writer: writer, cycle: cycle, socketPath: socketPath, ledger: ledger)
                }
            }
            usleep(UInt32.random(in: 20_000...120_000, using: &rng))
            _ = daemon.stop(signal: SIGKILL)
            group.wait()
            daemon = try Daemon(arguments: arguments, socketPath: socketPath)
            let state = try Client(path: socketPath).request("get crash")
            #expect(state.isOK, "cycle \(cycle): \(state.canonicalText.prefix(200))")
            if epoch == nil { epoch = state["epoch"]?.string }
            #expect(state["epoch"]?.string == epoch, "cycle \(cycle): the epoch changed")
            #expect(
                (state["version"]?.int ?? -1) >= ledger.lastVersion.withLock { $0 }, "cycle \(cycle): version went back"
            )
            let sections = try EventDecoder.outline(state["sections"])
            let sent = ledger.sent.withLock { $0 }
            let acknowledged = ledger.acknowledged.withLock { $0 }
            for writer in 0..<writers {
                let present = sections.first { $0.id == "w\(writer)" }?.items.map(\.id.text) ?? []
                // Every acknowledged write is there; anything else is a sent write, in sending order.
                #expect(present.count >= acknowledged[writer].count, "cycle \(cycle) writer \(writer)")
                #expect(
                    Array(present.prefix(acknowledged[writer].count)) == acknowledged[writer],
                    "cycle \(cycle) writer \(writer)")
                #expect(Array(sent[writer].prefix(present.count)) == present, "cycle \(cycle) writer \(writer)")
                // And each carries the data it was written with (its index).
                for item in sections.first(where: { $0.id == "w\(writer)" })?.items ?? [] {
                    let index = item.id.text.split(separator: ".").last.map(String.init)
                    #expect(
                        item.data?.text == index, "cycle \(cycle): \(item.id) holds \(item.data?.text ?? "no data")")
                }
            }
            // Writes the daemon kept without acknowledging count as sent-and-kept from now on.
            ledger.acknowledged.withLock { acknowledged in
                for writer in 0..<writers {
                    acknowledged[writer] = sections.first { $0.id == "w\(writer)" }?.items.map(\.id.text) ?? []
                }
            }
            ledger.sent.withLock { sent in
                for writer in 0..<writers {
                    sent[writer] = Array(sent[writer].prefix(ledger.acknowledged.withLock { $0[writer].count }))
                }
            }
            ledger.lastVersion.withLock { $0 = state["version"]?.int ?? 0 }
        }
        #expect(ledger.acknowledged.withLock { $0.map(\.count).reduce(0, +) } > Self.cycles())
        _ = daemon.stop()
    }

    private static func write(writer: Int, cycle: Int, socketPath: String, ledger: Ledger) {
        guard let client = try? Client(path: socketPath) else { return }
        for index in 0..<100_000 {
            let id = "c\(cycle).w\(writer).\(index)"
            ledger.sent.withLock { $0[writer].append(id) }
            guard
                (try? client.send(
                    #"append_items crash {"section":"w\#(writer)","items":[{"id":"\#(id)","data":\#(index)}]}"#))
                    != nil,
                let response = try? client.response(), response.isOK
            else { return }
            ledger.acknowledged.withLock { $0[writer].append(id) }
            ledger.lastVersion.withLock { $0 = max($0, response["version"]?.int ?? 0) }
        }
    }

    /// Random writes with data, a checkpoint (a clean stop), more writes, kill -9, restart: every
    /// collection comes back equal (ids, data, version, epoch), dropped ones stay gone, and a
    /// subscriber resumes across the checkpoint with one changeset.
    @Test func stateAcrossACheckpointAndACrashIsTheStateBefore() throws {
        let stateDirectory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "dc-equiv-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: stateDirectory) }
        let socketPath = stateDirectory.path + ".sock"
        let arguments = [
            "--state-dir", stateDirectory.path, "--checkpoint-log-bytes", "4096", "--history-versions", "1000",
        ]
        var daemon = try Daemon(arguments: arguments, socketPath: socketPath)
        var client = try Client(path: socketPath)
        var rng = SplitMix64(seed: 11)
        func randomWrites(_ count: Int) throws {
            for _ in 0..<count {
                let collection = "eq\(Int.random(in: 0..<4, using: &rng))"
                let item = "i\(Int.random(in: 0..<30, using: &rng))"
                let data = #"{"n":\#(Int.random(in: 0..<1000, using: &rng)),"s":"é\u0301"}"#
                let line: String
                switch Int.random(in: 0..<6, using: &rng) {
                case 0: line = #"append_sections \#(collection) {"sections":[{"id":"s\#(item)","data":\#(data)}]}"#
                case 1, 2: line = #"append_items \#(collection) {"items":[{"id":"\#(item)","data":\#(data)}]}"#
                case 3: line = #"update_items \#(collection) {"items":[{"id":"\#(item)","data":\#(data)}]}"#
                case 4:
                    line =
                        #"move_item \#(collection) {"item":"\#(item)","before":"i\#(Int.random(in: 0..<30, using: &rng))"}"#
                default: line = #"delete_items \#(collection) {"items":["\#(item)"]}"#
                }
                _ = try client.request(line)  // many fail (unknown or duplicate items): that is fine
            }
        }
        func states() throws -> [String: String] {
            var result: [String: String] = [:]
            for row in try client.request("list")["collections"]?.array ?? [] {
                guard let name = row["name"]?.string else { continue }
                var state = try client.request("get \(name)")
                if case .object(let members) = state { state = .object(members.filter { $0.key != "id" }) }
                result[name] = state.canonicalText
            }
            return result
        }
        try randomWrites(300)
        _ = try client.request(#"append_sections gone {"sections":[{"id":"x"}]}"#)
        #expect(try client.request("drop gone").isOK)
        let subscribed = try client.request("subscribe eq0")
        let before = try states()
        #expect(before.count >= 4 && before["gone"] == nil)
        _ = daemon.stop()  // a clean stop writes a checkpoint
        #expect(FileManager.default.fileExists(atPath: stateDirectory.path + "/checkpoint.json"))
        daemon = try Daemon(arguments: arguments, socketPath: socketPath)
        client = try Client(path: socketPath)
        #expect(try states() == before, "after a checkpoint")
        try randomWrites(300)
        let after = try states()
        _ = daemon.stop(signal: SIGKILL)
        daemon = try Daemon(arguments: arguments, socketPath: socketPath)
        client = try Client(path: socketPath)
        #expect(try states() == after, "after kill -9 on top of a checkpoint")
        let version = subscribed["version"]?.int ?? 0
        let resumed = try client.request(
            #"subscribe eq0 {"since":\#(version),"epoch":"\#(subscribed["epoch"]?.string ?? "")"}"#)
        #expect(resumed.isOK)
        #expect((resumed["version"]?.int ?? 0) > version, "the seeded writes changed eq0 after the subscription")
        // The history kept (--history-versions) reaches back past the subscription: one changeset
        // from where it was to the version now, as the contract promises.
        let event = try client.event()
        #expect(event["event"] == .string("changeset"), "\(event.canonicalText.prefix(200))")
        #expect(event["from"]?.int == version)
        #expect(event["version"]?.int == resumed["version"]?.int)
        #expect(event["epoch"]?.string == subscribed["epoch"]?.string, "the epoch survives")
        _ = daemon.stop()
    }

    /// With `--sync always` every acknowledged write was fdatasync'ed before its answer; with
    /// `--sync never`, none is.
    @Test(arguments: [("always", true), ("never", false)])
    func acknowledgementsWaitForTheSyncThePolicyPromises(policy: String, syncs: Bool) throws {
        let stateDirectory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "dc-sync-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: stateDirectory) }
        let daemon = try Daemon(
            arguments: ["--state-dir", stateDirectory.path, "--sync", policy], socketPath: stateDirectory.path + ".sock"
        )
        let client = try Client(path: daemon.socketPath)
        for index in 0..<20 {
            #expect(try client.request(#"append_sections sy {"sections":[{"id":"s\#(index)"}]}"#).isOK)
        }
        let counted = try client.request("stats")["log_syncs"]?.int ?? -1
        if syncs {
            #expect(counted >= 20)
        } else {
            #expect(counted == 0)
        }
        _ = daemon.stop()
    }

    /// History survives a crash (the log is replayed) and a clean stop (the checkpoint keeps it):
    /// either way a subscriber that comes back gets one changeset, not a snapshot.
    @Test(arguments: [SIGKILL, SIGTERM])
    func aSubscriberResumesAfterARestartWithOneChangeset(stoppedBy signal: Int32) throws {
        let stateDirectory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "dc-resume-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: stateDirectory) }
        let socketPath = stateDirectory.path + ".sock"
        var daemon = try Daemon(arguments: ["--state-dir", stateDirectory.path], socketPath: socketPath)
        var client = try Client(path: socketPath)
        let subscribed = try client.request("subscribe r")
        var mirror = CollectionMirror()
        try mirror.feed(try client.event())
        _ = try client.request("unsubscribe r")
        for index in 0..<3 { _ = try client.request(#"append_sections r {"sections":[{"id":"s\#(index)"}]}"#) }
        _ = daemon.stop(signal: signal)
        if signal == SIGTERM {
            #expect(FileManager.default.fileExists(atPath: stateDirectory.path + "/checkpoint.json"))
        }
        daemon = try Daemon(arguments: ["--state-dir", stateDirectory.path], socketPath: socketPath)
        client = try Client(path: socketPath)
        let again = try client.request(#"subscribe r {"since":0,"epoch":"\#(subscribed["epoch"]?.string ?? "")"}"#)
        #expect(again["version"]?.int == 3)
        let event = try client.event()
        #expect(event["event"] == .string("changeset"))
        try mirror.feed(event)
        #expect(mirror.sections.map(\.id) == ["s0", "s1", "s2"])
        _ = daemon.stop()
    }
}

/// The write-ahead log's framing: a torn tail is cut off, a corrupt middle stops recovery.
@Suite struct WriteAheadLogTests {
    private func directory() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("dc-wal-\(UUID().uuidString.prefix(8))").path
    }

    private func writeSomeBatches(to path: String) throws {
        let store = try StateStore(directory: path, options: .init(), logger: Logger(label: "test"))
        let engine = ApplyEngine()
        try store.recover(into: engine)
        let parser = RequestParser()
        for index in 0..<3 {
            let request = try parser.parse(line: Array(#"append_sections c {"sections":[{"id":"s\#(index)"}]}"#.utf8))
            _ = engine.process([.request(request, ResponseAddress(connection: 1, slot: UInt64(index)))])
            try store.append(engine.takeLogRecords())
        }
    }

    private func sectionIDs(recoveredFrom path: String) throws -> [String] {
        let engine = ApplyEngine()
        try StateStore(directory: path, options: .init(), logger: Logger(label: "test")).recover(into: engine)
        return engine.checkpointEntries().first?.snapshot.sections.map(\.id.text) ?? []
    }

    /// Where the second record starts: after the first record's 24-byte header and payload.
    private func secondRecordOffset(_ bytes: Data) -> Int {
        24 + (Int(bytes[12]) | Int(bytes[13]) << 8 | Int(bytes[14]) << 16 | Int(bytes[15]) << 24)
    }

    @Test func aTornTailIsCutOffKeptAsideAndTheLogGoesOn() throws {
        let path = directory()
        defer { try? FileManager.default.removeItem(atPath: path) }
        try writeSomeBatches(to: path)
        let log = path + "/wal-1.log"
        let whole = try Data(contentsOf: URL(fileURLWithPath: log))
        try whole.dropLast(5).write(to: URL(fileURLWithPath: log))
        // Recovery cuts the torn record, keeps its bytes aside, and appends after the cut.
        do {
            let engine = ApplyEngine()
            let store = try StateStore(directory: path, options: .init(), logger: Logger(label: "test"))
            try store.recover(into: engine)
            let cutAt = try Data(contentsOf: URL(fileURLWithPath: log)).count
            let aside = try Data(contentsOf: URL(fileURLWithPath: log + ".torn-\(cutAt)"))
            #expect(aside == whole.dropLast(5).dropFirst(cutAt), "the cut bytes are kept aside")
            let request = try RequestParser().parse(
                line: Array(#"append_sections c {"sections":[{"id":"s3"}]}"#.utf8))
            _ = engine.process([.request(request, ResponseAddress(connection: 1, slot: 9))])
            try store.append(engine.takeLogRecords())
        }
        #expect(try sectionIDs(recoveredFrom: path) == ["s0", "s1", "s3"])
    }

    /// Damage inside the second of three records stops recovery naming the offset, and leaves
    /// the files as they are. The length case is the issue's reproduction: a length of about
    /// 2 GB points past the end of the file, yet it is no torn tail (the header checksum fails
    /// and valid records follow).
    @Test(arguments: [("a flipped payload byte", 24 + 2, UInt8(0xff)), ("a length of about 2 GB", 12 + 3, 0x7f)])
    func damageInTheMiddleStopsRecoveryAndNamesTheOffset(what: String, offsetInRecord: Int, mask: UInt8) throws {
        let path = directory()
        defer { try? FileManager.default.removeItem(atPath: path) }
        try writeSomeBatches(to: path)
        let log = path + "/wal-1.log"
        var bytes = try Data(contentsOf: URL(fileURLWithPath: log))
        let second = secondRecordOffset(bytes)
        bytes[second + offsetInRecord] ^= mask
        try bytes.write(to: URL(fileURLWithPath: log))
        do {
            _ = try sectionIDs(recoveredFrom: path)
            Issue.record("\(what): recovery should have failed")
        } catch let error as PersistenceError {
            #expect("\(error)".contains("wal-1.log at offset \(second)"), "\(what): \(error)")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: log)) == bytes, "\(what): the evidence is kept")
    }

    @Test func aCheckpointReplacesTheLog() throws {
        let path = directory()
        defer { try? FileManager.default.removeItem(atPath: path) }
        try writeSomeBatches(to: path)
        do {
            let engine = ApplyEngine()
            let store = try StateStore(directory: path, options: .init(), logger: Logger(label: "test"))
            try store.recover(into: engine)
            try store.checkpoint(engine)
        }
        #expect(!FileManager.default.fileExists(atPath: path + "/wal-1.log"))
        #expect(try sectionIDs(recoveredFrom: path) == ["s0", "s1", "s2"])
    }
}

import DiffcastCore
import DiffcastWire
import Foundation
import Logging
import Testing

@testable import DiffcastEngine
@testable import DiffcastStorage

#if canImport(Glibc)
    import Glibc
#endif

/// Every single-byte fault of a small state directory, tried one by one: each byte of the log
/// and of the checkpoint flipped, zeroed, and the file truncated there. Every case must either
/// recover exactly an acknowledged state that keeps every record before the fault, or refuse to
/// start naming the damaged file (and, for the log, the offset). Never fewer acknowledged
/// writes without a word.
@Suite(.serialized) struct StorageFaultTests {
    private static let quiet = Logger(label: "faults") { _ in SwiftLogNoOpLogHandler() }

    /// A state's fingerprint: every collection's name, epoch, version and content digest.
    private static func fingerprint(_ engine: ApplyEngine) -> String {
        engine.checkpointEntries().map { "\($0.name)|\($0.epoch)|\($0.version)|\(Digest(of: $0.snapshot))" }
            .joined(separator: ";")
    }

    private struct Acknowledged {
        /// Log records (one per apply-queue batch) when the state was acknowledged (0: before any).
        var records: Int
        var fingerprint: String
    }

    /// Writes with data into a fresh state directory; returns the acknowledged states in order.
    private static func writeHistory(in directory: String, writes: [String], checkpointAfter: Int? = nil) throws
        -> [Acknowledged]
    {
        var options = StateStore.Options()
        options.checkpointLogBytes = 1 << 30
        let store = try StateStore(directory: directory, options: options, logger: quiet)
        let engine = ApplyEngine()
        try store.recover(into: engine)
        var acknowledged = [Acknowledged(records: 0, fingerprint: fingerprint(engine))]
        var records = 0
        for (index, line) in writes.enumerated() {
            let request = try RequestParser().parse(line: Array(line.utf8))
            _ = engine.process([.request(request, ResponseAddress(connection: 1, slot: UInt64(index)))])
            let logged = engine.takeLogRecords()
            try store.append(logged)
            records += logged.isEmpty ? 0 : 1
            acknowledged.append(Acknowledged(records: records, fingerprint: fingerprint(engine)))
            if index + 1 == checkpointAfter { try store.checkpoint(engine) }
        }
        return acknowledged
    }

    private static let writes: [String] =
        [#"apply c {"sections":[{"id":"s","data":{"n":"é"},"items":[{"id":"a","data":1}]}]}"#]
        + (1...8).map { #"append_items c {"items":[{"id":"i\#($0)","data":{"likes":\#($0 * 11)}}]}"# }
        + [#"update_items c {"items":[{"id":"a","data":[2,"x"]}]}"#]

    /// How one damaged copy came back.
    private enum Outcome: String, CaseIterable {
        case recoveredEverything = "recovered every record"
        case recoveredPrefix = "recovered the records before the fault (torn tail cut, kept aside)"
        case refusedNamingIt = "refused to start, naming the file and offset"
        case silentLoss = "WRONG: started with other state, or fewer acknowledged writes, without an error"
    }

    private struct Tally: CustomStringConvertible {
        var counts: [Outcome: Int] = [:]
        var failures: [String] = []

        mutating func add(_ outcome: Outcome, _ what: @autoclosure () -> String) {
            counts[outcome, default: 0] += 1
            if outcome == .silentLoss, failures.count < 10 { failures.append(what()) }
        }

        var description: String {
            Outcome.allCases.map { "\($0.rawValue): \(counts[$0, default: 0])" }.joined(separator: "\n")
        }
    }

    /// Recovers a copy of the directory; classifies the result against the acknowledged states.
    private static func recover(
        _ directory: String, acknowledged: [Acknowledged], keeping mustKeep: Int, naming file: String,
        withOffset: Bool
    ) -> Outcome {
        recoverExplained(directory, acknowledged: acknowledged, keeping: mustKeep, naming: file, withOffset: withOffset)
            .outcome
    }

    /// `recover`, with what was seen: the error, or the state and how many records it matched.
    private static func recoverExplained(
        _ directory: String, acknowledged: [Acknowledged], keeping mustKeep: Int, naming file: String,
        withOffset: Bool
    ) -> (outcome: Outcome, seen: String) {
        let engine = ApplyEngine()
        do {
            let store = try StateStore(directory: directory, options: StateStore.Options(), logger: quiet)
            try store.recover(into: engine)
        } catch {
            let message = "\(error)"
            let named = message.contains(file) && (!withOffset || message.contains("offset"))
            return (named ? .refusedNamingIt : .silentLoss, "error: \(message)")
        }
        let state = fingerprint(engine)
        guard let match = acknowledged.last(where: { $0.fingerprint == state }) else {
            return (
                .silentLoss,
                "a state no acknowledged state has: \(state); the last acknowledged: \(acknowledged.last?.fingerprint ?? "")"
            )
        }
        if match.records == acknowledged.last?.records { return (.recoveredEverything, "") }
        return (
            match.records >= mustKeep ? .recoveredPrefix : .silentLoss,
            "the state after \(match.records) records, \(mustKeep) needed"
        )
    }

    private static func scratch() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent(
            "faults-\(UUID().uuidString.prefix(8))"
        )
        .path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    private static func reset(_ directory: String, with files: [String: [UInt8]]) throws {
        for name in try FileManager.default.contentsOfDirectory(atPath: directory) {
            try FileManager.default.removeItem(atPath: directory + "/" + name)
        }
        for (name, bytes) in files {
            _ = FileManager.default.createFile(atPath: directory + "/" + name, contents: Data(bytes))
        }
    }

    /// The record boundaries of a log: offset where each record ends.
    private static func recordEnds(_ log: [UInt8]) -> [Int] {
        var ends: [Int] = []
        var offset = 0
        while case .success(let record) = LogFrame.record(in: log, at: offset) {
            ends.append(record.end)
            offset = record.end
        }
        return ends
    }

    @Test func everyByteOfTheLogFlippedZeroedOrCutIsCaughtOrRecovered() throws {
        let original = try Self.scratch()
        let acknowledged = try Self.writeHistory(in: original, writes: Self.writes)
        let log = Array(try Data(contentsOf: URL(fileURLWithPath: original + "/wal-1.log")))
        let ends = Self.recordEnds(log)
        #expect(ends.count == acknowledged.last?.records && ends.last == log.count, "the log holds every record")
        let copy = try Self.scratch()
        var tally = Tally()
        for offset in 0..<log.count {
            // Records that end at or before the fault must all come back.
            let intact = ends.filter { $0 <= offset }.count
            var flipped = log
            flipped[offset] ^= 0xff
            var zeroed = log
            zeroed[offset] = 0
            for (kind, bytes) in [("flip", flipped), ("zero", zeroed), ("truncate", Array(log[..<offset]))]
            where bytes != log {
                try Self.reset(copy, with: ["wal-1.log": bytes])
                let (outcome, seen) = Self.recoverExplained(
                    copy, acknowledged: acknowledged, keeping: intact, naming: "wal-1.log", withOffset: true)
                tally.add(outcome, "\(kind) at \(offset): \(seen)")
                if outcome == .recoveredPrefix, !(kind == "truncate" && (offset == 0 || ends.contains(offset))) {
                    let aside = try FileManager.default.contentsOfDirectory(atPath: copy).filter {
                        $0.contains(".torn-")
                    }
                    #expect(aside.count == 1, "\(kind) at \(offset): the cut bytes are kept aside")
                }
            }
        }
        print("Log of \(log.count) bytes, \(ends.count) records; every byte flipped, zeroed, truncated:\n\(tally)")
        #expect(tally.counts[.silentLoss, default: 0] == 0, "\(tally.failures)")
        #expect(tally.counts[.refusedNamingIt, default: 0] > 0 && tally.counts[.recoveredPrefix, default: 0] > 0)
    }

    @Test func everyByteOfTheCheckpointFlippedZeroedOrCutIsCaught() throws {
        let original = try Self.scratch()
        let acknowledged = try Self.writeHistory(in: original, writes: Self.writes, checkpointAfter: 7)
        let files = try FileManager.default.contentsOfDirectory(atPath: original)
        #expect(Set(files) == ["checkpoint.json", "wal-2.log", "lock"], "\(files)")
        let checkpoint = Array(try Data(contentsOf: URL(fileURLWithPath: original + "/checkpoint.json")))
        let log = Array(try Data(contentsOf: URL(fileURLWithPath: original + "/wal-2.log")))
        let copy = try Self.scratch()
        try Self.reset(copy, with: ["checkpoint.json": checkpoint, "wal-2.log": log])
        let undamaged = Self.recoverExplained(
            copy, acknowledged: acknowledged, keeping: 0, naming: "", withOffset: false)
        #expect(undamaged.outcome == .recoveredEverything, "the undamaged copy recovers: \(undamaged.seen)")
        var tally = Tally()
        for offset in 0..<checkpoint.count {
            var flipped = checkpoint
            flipped[offset] ^= 0xff
            var zeroed = checkpoint
            zeroed[offset] = 0
            for (kind, bytes) in [("flip", flipped), ("zero", zeroed), ("truncate", Array(checkpoint[..<offset]))]
            where bytes != checkpoint {
                try Self.reset(copy, with: ["checkpoint.json": bytes, "wal-2.log": log])
                // Nothing may be lost here: the checkpoint holds acknowledged state.
                let mustKeep = acknowledged.last?.records ?? 0
                let (outcome, seen) = Self.recoverExplained(
                    copy, acknowledged: acknowledged, keeping: mustKeep, naming: "checkpoint.json", withOffset: false)
                tally.add(outcome, "\(kind) at \(offset): \(seen)")
            }
        }
        print("Checkpoint of \(checkpoint.count) bytes; every byte flipped, zeroed, truncated:\n\(tally)")
        #expect(tally.counts[.silentLoss, default: 0] == 0, "\(tally.failures)")
    }

    @Test func aMissingCheckpointOrLogFileStopsTheStart() throws {
        let original = try Self.scratch()
        let acknowledged = try Self.writeHistory(in: original, writes: Self.writes, checkpointAfter: 7)
        let checkpoint = Array(try Data(contentsOf: URL(fileURLWithPath: original + "/checkpoint.json")))
        let log = Array(try Data(contentsOf: URL(fileURLWithPath: original + "/wal-2.log")))
        let copy = try Self.scratch()
        for (files, named) in [
            (["wal-2.log": log], "checkpoint.json"),
            (["checkpoint.json": checkpoint], "wal-2.log"),
            (["checkpoint.json": checkpoint, "wal-3.log": log], "wal-2.log"),
        ] {
            try Self.reset(copy, with: files)
            #expect(
                Self.recover(copy, acknowledged: acknowledged, keeping: 0, naming: named, withOffset: false)
                    == .refusedNamingIt, "\(files.keys.sorted()) should be refused naming \(named)")
        }
    }

    @Test func verifyStateReportsWithoutChangingAnything() throws {
        let original = try Self.scratch()
        _ = try Self.writeHistory(in: original, writes: Self.writes)
        let path = original + "/wal-1.log"
        var log = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        #expect(try StateStore.verify(directory: original).contains("10 log records replayed"))
        log[40] ^= 0x01
        _ = FileManager.default.createFile(atPath: path, contents: Data(log))
        #expect(throws: PersistenceError.self) { try StateStore.verify(directory: original) }
        #expect(Array(try Data(contentsOf: URL(fileURLWithPath: path))) == log, "verify changed the log")
    }
}

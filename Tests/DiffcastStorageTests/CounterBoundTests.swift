import DiffcastCore
import Foundation
import Logging
import Testing

@testable import DiffcastEngine
@testable import DiffcastStorage

/// Regressions from the fuzz targets (Fuzz/regressions): a version, sequence or generation of
/// 2^64 − 1 in a checkpoint or a log record was taken, and the next write (or the recovery)
/// trapped on `+ 1`. Such values are now damage.
@Suite struct CounterBoundTests {
    @Test(arguments: [(UInt64.max, UInt64(1), UInt64(1)), (1, .max, 1), (1, 1, .max)])
    func aCheckpointWithACounterPastTwoToTheSixtyThirdIsDamaged(version: UInt64, generation: UInt64, next: UInt64) {
        let bytes = CheckpointFile.encode(
            [("c", "e", version, Snapshot(), [])], coveredGeneration: generation, nextSequence: next)
        #expect(throws: PersistenceError.self) { _ = try CheckpointFile.decode(bytes, path: "checkpoint.json") }
    }

    @Test func aCheckpointAtTheBoundIsRead() throws {
        let bound = UInt64(Int64.max)
        let bytes = CheckpointFile.encode([("c", "e", bound, Snapshot(), [])], coveredGeneration: 1, nextSequence: 1)
        #expect(try CheckpointFile.decode(bytes, path: "checkpoint.json").collections.first?.version == bound)
    }

    @Test func aLogRecordAtVersionTwoToTheSixtyFourMinusOneIsUnreadable() {
        let payload = Array(#"[{"t":"batch","c":"pp","v":18446744073709551615,"w":[]}]"#.utf8)
        #expect(LogRecord.records(inPayload: payload) == nil)
        let fine = Array(#"[{"t":"batch","c":"pp","v":9223372036854775807,"w":[]}]"#.utf8)
        #expect(LogRecord.records(inPayload: fine)?.count == 1)
    }

    /// A logged batch that does not follow its collection's version (here a second version 0)
    /// stops recovery naming it: replayed, it put a version twice into the history, and the next
    /// checkpoint could not be read back (found by the wal_file fuzz target).
    @Test func aLoggedBatchThatDoesNotFollowStopsRecovery() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent(
            "dc-follow-\(UUID().uuidString.prefix(8))"
        ).path
        defer { try? FileManager.default.removeItem(atPath: path) }
        do {
            let store = try StateStore(directory: path, options: .init(), logger: Logger(label: "test"))
            try store.recover(into: ApplyEngine())
            try store.append([.create(collection: "c", epoch: "e"), .batch(collection: "c", version: 0, writes: [])])
        }
        let store = try StateStore(directory: path, options: .init(), logger: Logger(label: "test"))
        #expect(throws: PersistenceError.self) { try store.recover(into: ApplyEngine()) }
    }
}

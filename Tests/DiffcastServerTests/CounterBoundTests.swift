import DiffcastCore
import Testing

@testable import DiffcastServer

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
}

import DiffcastCore
import DiffcastWire

@testable import DiffcastEngine
@testable import DiffcastStorage

extension FuzzTargets {
    /// Shared-log snapshots as a daemon of a backbone reads them: at join (`SharedLogApplier.join`:
    /// `SharedLogSnapshot(decoding:)`, digest checked, then `ApplyEngine.adopt`) and when a log
    /// message does not fit what it holds (`loadSnapshot`). A snapshot of a collection the engine
    /// holds under the same epoch turns into one changeset for its subscribers, which a mirror
    /// checks. What the engine adopts must survive a snapshot of its own (encode, decode) and a
    /// checkpoint, and take a write.
    ///
    /// Input: snapshots separated by NUL bytes. The first ones are handed over at join, each later
    /// one is loaded for a message (of its collection, version 1 after the one held) that does not
    /// fit; a part starting with `L` is instead a log message payload to follow.
    public static func sharedLogSnapshot(_ input: UnsafeRawBufferPointer) {
        let parts = Fuzz.parts(Array(input), separator: 0)
        let follower = SharedLogFollower()
        let atJoin = parts.count > 1 ? parts.count / 2 : parts.count
        _ = follower.join(Array(parts.prefix(atJoin)), lastSequence: 100)
        var sequence: UInt64 = 100
        for part in parts.dropFirst(atJoin) {
            sequence += 1
            let records: [LogRecord]
            if part.first == UInt8(ascii: "L") {
                records = LogRecord.records(inPayload: Array(part.dropFirst())) ?? []
            } else {
                // A message that skips versions: the engine takes the snapshot instead.
                follower.backbone.snapshot = part
                guard let snapshot = SharedLogSnapshot(decoding: part) else { continue }
                let next = snapshot.version == .max ? snapshot.version : snapshot.version + 1
                records = [.batch(collection: snapshot.name, version: next, writes: [])]
                follower.oracle.follow(snapshot.name)
            }
            follower.deliver(records, sequence: sequence, collection: records.first?.collection)
        }
        let engine = follower.engine
        // What the engine holds survives its own snapshots.
        for entry in engine.checkpointEntries() {
            guard let bytes = engine.snapshotForSharedLog(of: entry.name, logSequence: 9),
                let decoded = SharedLogSnapshot(decoding: bytes)
            else { Fuzz.failure("the engine's snapshot of '\(entry.name)' does not decode") }
            guard decoded.name == entry.name, decoded.epoch == entry.epoch, decoded.version == entry.version,
                decoded.logSequence == 9, Digest(of: decoded.sections) == Digest(of: entry.snapshot)
            else { Fuzz.failure("the engine's snapshot of '\(entry.name)' decodes to another state") }
        }
        checkCheckpointRoundTrip(of: engine, "the follower")
        probeEveryCollection(of: engine)
        checkCheckpointRoundTrip(of: engine, "the follower after a write")
    }
}

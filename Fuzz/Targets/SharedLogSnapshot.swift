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
        let engine = ApplyEngine(
            historyLimits: HistoryLimits(versions: 4, items: 256), makeEpoch: Fuzz.countingEpochs())
        let backbone = FakeBackbone(node: "follower")
        let applier = SharedLogApplier(
            engine: engine, backbone: backbone, node: "follower", snapshotEvery: 1000, logger: Fuzz.silentLogger)
        let oracle = EventOracle(engine: engine)

        let atJoin = parts.count > 1 ? parts.count / 2 : parts.count
        // The log ends where the last snapshot says (a snapshot past 100 is refused as past the end).
        let joining = Array(parts.prefix(atJoin))
        let logEnd = min(joining.compactMap { SharedLogSnapshot(decoding: $0)?.logSequence }.max() ?? 0, 100)
        backbone.nextSequence = logEnd
        oracle.check(applier.join(BackboneStart(snapshots: joining, logEnd: logEnd)))
        var sequence: UInt64 = 100
        for part in parts.dropFirst(atJoin) {
            sequence += 1
            let records: [LogRecord]
            if part.first == UInt8(ascii: "L") {
                records = LogRecord.records(inPayload: Array(part.dropFirst())) ?? []
            } else {
                // A message that skips versions: the engine takes the snapshot instead.
                backbone.snapshot = part
                guard let snapshot = SharedLogSnapshot(decoding: part) else { continue }
                let next = snapshot.version == .max ? snapshot.version : snapshot.version + 1
                records = [.batch(collection: snapshot.name, version: next, writes: [])]
                oracle.follow(snapshot.name)
            }
            for name in Set(records.map(\.collection)) { oracle.follow(name) }
            backbone.arrivals.log = [
                LogMessage(sequence: sequence, collection: records.first?.collection, records: records)
            ]
            backbone.nextSequence = sequence
            oracle.check(applier.run([]))
        }
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

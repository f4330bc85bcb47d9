import DiffcastCore
import DiffcastWire

@testable import DiffcastEngine
@testable import DiffcastStorage

extension FuzzTargets {
    /// Request lines run through the apply engine as the daemon runs them, with oracles for what the
    /// engine promises:
    ///
    /// - every event it publishes takes a subscriber's mirror to the digest the event carries
    ///   (and a `subscribe` with `since` gets a changeset from the version it names);
    /// - the write-ahead-log records of each batch survive encoding (`LogRecord.payload(of:)` →
    ///   `records(inPayload:)`), replay on a second engine (`replay`, as recovery does) and follow
    ///   on a third (`follow`, as a daemon of a backbone does) to the same state;
    /// - a batch rolled back (its records could not be made durable) leaves the state as before;
    /// - a checkpoint of the result decodes and restores to the same state.
    ///
    /// Input: request lines; an empty line ends a batch (one drain of the apply queue), a line `!`
    /// ends it and rolls it back.
    public static func requestApply(_ input: UnsafeRawBufferPointer) {
        let lines = Fuzz.parts(Array(input), separator: UInt8(ascii: "\n"))
        let limits = CollectionLimits(collections: 4, itemsPerCollection: 64)
        let history = HistoryLimits(versions: 4, items: 256)
        let engine = ApplyEngine(historyLimits: history, limits: limits, makeEpoch: Fuzz.countingEpochs())
        let replayed = ApplyEngine(historyLimits: history, limits: limits)
        let follower = ApplyEngine(historyLimits: history, limits: limits)
        let oracle = EventOracle(engine: engine, versionZeroIsEmpty: true)

        var batch: [Job] = []
        var slot: UInt64 = 0
        func run(rollBack: Bool) {
            defer { batch = [] }
            guard !batch.isEmpty else { return }
            for case .request(let request, _) in batch {
                if let name = request.command.collection { oracle.follow(name) }
            }
            let before = Summary(engine)
            let mirrors = oracle.saved
            let outcomes = engine.process(batch)
            let records = engine.takeLogRecords()
            if rollBack {
                engine.rollBackLastBatch()
                let after = Summary(engine)
                guard after == before else { Fuzz.failure("rolled back to [\(after)], was [\(before)]") }
                oracle.reset(to: mirrors)
                return
            }
            oracle.check(outcomes)
            _ = engine.commitLastBatch()
            guard !records.isEmpty else { return }
            let payload = LogRecord.payload(of: records)
            guard let decoded = LogRecord.records(inPayload: payload), decoded == records else {
                Fuzz.failure("log records do not survive encoding: \(String(decoding: payload, as: UTF8.self))")
            }
            for record in decoded {
                do {
                    try replayed.replay(record)
                } catch {
                    Fuzz.failure("a logged record does not replay (\(error)): \(record)")
                }
            }
            _ = follower.follow(decoded)
        }

        for line in lines {
            if line.isEmpty || line == [UInt8(ascii: "!")] {
                run(rollBack: !line.isEmpty)
                continue
            }
            guard let request = parseRequest(line) else { continue }
            switch request.command {
            // Answered by the loop, never by the engine.
            case .ping, .auth, .unsubscribe: continue
            default: break
            }
            slot += 1
            batch.append(.request(request, ResponseAddress(connection: 1, slot: slot)))
        }
        run(rollBack: false)

        let state = Summary(engine)
        let afterReplay = Summary(replayed)
        guard afterReplay == state else {
            Fuzz.failure("replayed log gives [\(afterReplay)], the engine holds [\(state)]")
        }
        let afterFollow = Summary(follower)
        guard afterFollow == state else {
            Fuzz.failure("followed log gives [\(afterFollow)], the engine holds [\(state)]")
        }

        checkCheckpointRoundTrip(of: engine, "the engine")
    }
}

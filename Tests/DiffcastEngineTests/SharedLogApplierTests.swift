import DiffcastClient
import DiffcastCore
import DiffcastTestSupport
import DiffcastWire
import Logging
import Testing

@testable import DiffcastEngine

/// The shared-log logic without NATS: several daemons' appliers over an in-memory model of what
/// JetStream gives the real backbone (one log with per-collection expected-last-sequence appends,
/// leases, request routing). The oracle is a lone `ApplyEngine` fed the same writes in the same
/// order: sharing must be invisible in every answer and in the final state.
@Suite struct SharedLogApplierTests {
    @Test func writesThroughAnyDaemonAnswerAsOneDaemonWouldAcrossAnOwnersDeath() throws {
        let cluster = MemoryCluster()
        let a = cluster.join("a")
        let b = cluster.join("b")
        let c = cluster.join("c", mayOwn: false)
        let reference = ApplyEngine()
        var generator = SeededGenerator(seed: 7)
        var daemons = [a, b, c]
        for step in 0..<400 {
            if step == 200 {
                _ = a.applier.run([])
                try a.expectEventsCompose(to: a.engine.checkpointEntries().first?.snapshot)
                // `a` (the owner since the first write) dies; its lease ends.
                cluster.kill("a")
                daemons = [b, c]
            }
            // Log messages reach each daemon late, now and then (its own ones too).
            for daemon in daemons { daemon.backbone.holdsBackArrivals = generator.next() % 3 == 0 }
            let line = randomWrite(step, using: &generator)
            let daemon = daemons[Int(generator.next() % UInt64(daemons.count))]
            let shared = try daemon.answer(line, slot: UInt64(step))
            let alone = try answerIn(reference.process([job(line, slot: UInt64(step))]), slot: UInt64(step))
            #expect(shared == alone, "step \(step) via \(daemon.node): \(line)")
        }
        let truth = try #require(reference.checkpointEntries().first)
        for daemon in [b, c] {
            _ = daemon.applier.run([])
            let held = try #require(daemon.engine.checkpointEntries().first)
            #expect(held.version == truth.version)
            #expect(Digest(of: held.snapshot) == Digest(of: truth.snapshot))
            try daemon.expectEventsCompose(to: held.snapshot)
        }
        #expect(cluster.leases["c"] == "b")
    }

    @Test func aStaleOwnerIsFencedUndoesItsBatchAndForwardsTheWrite() throws {
        let cluster = MemoryCluster()
        let a = cluster.join("a")
        let b = cluster.join("b")
        _ = try a.answer(#"{"op":"append_sections","collection":"c","sections":[{"id":"s","items":["x"]}]}"#, slot: 0)
        // The lease moves to `b` while `a` still believes it owns (stopped, or cut off), and `b`
        // writes before `a` has seen anything of it.
        a.backbone.holdsBackArrivals = true
        cluster.leases["c"] = "b"
        #expect(
            try b.answer(#"{"op":"append_items","collection":"c","items":["y"]}"#, slot: 0).contains("\"version\":2"))
        let answer = try a.answer(#"{"op":"append_items","collection":"c","items":["z"]}"#, slot: 1)
        #expect(answer == #"{"ok":true,"op":"append_items","version":3}"# + "\n")
        #expect(cluster.log.map(\.appender) == ["a", "b", "b"], "the stale owner appended nothing more")
        #expect(!a.backbone.believesItOwns("c"))
        let held = try #require(a.engine.checkpointEntries().first)
        #expect(held.version == 3)
        #expect(try a.answer(#"{"op":"get","collection":"c"}"#, slot: 2).contains(#""items":["x","y","z"]"#))
        try a.expectEventsCompose(to: held.snapshot)
    }

    @Test func anOwnersOwnMessagesArrivingLateChangeNothingAgain() throws {
        let cluster = MemoryCluster()
        let a = cluster.join("a")
        let lines = [
            #"{"op":"append_sections","collection":"c","sections":[{"id":"s","items":["x"]}]}"#,
            #"{"op":"append_items","collection":"c","items":["y"]}"#, #"{"op":"drop","collection":"c"}"#,
            #"{"op":"append_sections","collection":"c","sections":[{"id":"t","items":["z"]}]}"#,
        ]
        for (slot, line) in lines.enumerated() {
            a.backbone.holdsBackArrivals = true
            #expect(try a.answer(line, slot: UInt64(slot)).hasPrefix(#"{"ok":true"#))
        }
        a.backbone.holdsBackArrivals = false
        let late = a.applier.run([])
        #expect(late.isEmpty, "its own messages were applied again: \(late)")
        #expect(try a.answer(#"{"op":"get","collection":"c"}"#, slot: 9).contains(#""items":["z"]"#))
    }

    @Test func aJoiningDaemonStartsFromTheSnapshotAfterTheLogWasCut() throws {
        let cluster = MemoryCluster(snapshotEvery: 5)
        let a = cluster.join("a")
        for step in 0..<23 {
            let line =
                step == 0
                ? #"{"op":"append_sections","collection":"c","sections":[{"id":"s","items":[]}]}"#
                : #"{"op":"append_items","collection":"c","items":["i\#(step)"]}"#
            #expect(try a.answer(line, slot: UInt64(step)).hasPrefix(#"{"ok":true"#))
        }
        #expect(cluster.log.count < 23 / 5 + 5, "the log was not cut: \(cluster.log.count) messages")
        let late = cluster.join("late")
        let held = try #require(late.engine.checkpointEntries().first)
        let truth = try #require(a.engine.checkpointEntries().first)
        #expect(held.version == truth.version && held.epoch == truth.epoch)
        #expect(Digest(of: held.snapshot) == Digest(of: truth.snapshot))
    }

    /// A snapshot is as open to forgery as the log: one naming a log message far past the log's
    /// end would make a daemon that adopted it take every later message up to there as applied,
    /// so the collection would stand still on it for good. It is skipped, and the log replayed
    /// instead.
    @Test func aSnapshotNamingALogMessagePastTheEndIsSkipped() throws {
        let cluster = MemoryCluster()
        let a = cluster.join("a")
        let writes = (0..<6).map { step in
            step == 0
                ? #"{"op":"append_sections","collection":"c","sections":[{"id":"s","items":[]}]}"#
                : #"{"op":"append_items","collection":"c","items":["i\#(step)"]}"#
        }
        for (slot, line) in writes.prefix(3).enumerated() {
            #expect(try a.answer(line, slot: UInt64(slot)).hasPrefix(#"{"ok":true"#))
        }
        let snapshot = try #require(a.engine.snapshotForSharedLog(of: "c", logSequence: 1 << 40))
        cluster.snapshots["c"] = snapshot
        let late = cluster.join("late")
        for (slot, line) in writes.enumerated().dropFirst(3) {
            #expect(try a.answer(line, slot: UInt64(slot)).hasPrefix(#"{"ok":true"#))
        }
        _ = late.applier.run([])
        let held = try #require(late.engine.checkpointEntries().first)
        let truth = try #require(a.engine.checkpointEntries().first)
        #expect(held.version == truth.version && held.version == 6)
        #expect(Digest(of: held.snapshot) == Digest(of: truth.snapshot))
        let statistics = try late.applier.run([job(#"{"op":"stats"}"#, slot: 99)]).compactMap { outcome in
            if case .statistics(_, _, let statistics) = outcome { statistics.backbone } else { nil }
        }
        #expect(statistics.map(\.logSkipped) == [1])
    }

    /// An answer to a forwarded write comes back on a NATS inbox anyone with rights may publish
    /// to. One naming a version the log does not hold must not hold the connection's later
    /// answers back; one naming a log message past the log's end is refused.
    @Test func aForwardedAnswerBeyondTheLogHoldsNothingBack() throws {
        let cluster = MemoryCluster()
        let a = cluster.join("a")
        let b = cluster.join("b")
        let create = #"{"op":"append_sections","collection":"c","sections":[{"id":"s","items":[]}]}"#
        #expect(try a.answer(create, slot: 0).hasPrefix(#"{"ok":true"#))
        cluster.forgeAnswers = { result in
            guard case .answered(let sequence, _) = result else { return result }
            return .answered(sequence: sequence, responses: [Array(#"{"ok":true,"version":1099511627776}"#.utf8)])
        }
        let write = #"{"op":"append_items","collection":"c","items":["x"]}"#
        let marks = try b.applier.run([job(write, slot: 1)]).compactMap { outcome in
            if case .acknowledged(_, _, let mark, _) = outcome { mark } else { nil }
        }
        #expect(marks == [VersionMark(collection: "c", version: 2)])
        cluster.forgeAnswers = { _ in .answered(sequence: 1 << 40, responses: [Array(#"{"ok":true,"version":3}"#.utf8)])
        }
        let refused = try b.applier.run([job(write, slot: 2)])
        #expect(try answerIn(refused, slot: 2).contains(#""code":"unavailable""#))
    }

    /// A read forwarded with writes (they arrived together at a daemon that does not own the
    /// collection) is answered with the owner's answer as it came, state and all; a write whose
    /// `id` is deeply nested is acknowledged, not refused because its echo is deep.
    @Test func readsForwardedWithWritesGetTheOwnersAnswer() throws {
        let cluster = MemoryCluster()
        let a = cluster.join("a")
        let b = cluster.join("b")
        let create = #"{"op":"append_sections","collection":"c","sections":[{"id":"s","items":["a"]}]}"#
        #expect(try a.answer(create, slot: 0).hasPrefix(#"{"ok":true"#))
        let nestedID = String(repeating: "[", count: 40) + "1" + String(repeating: "]", count: 40)
        let outcomes = b.applier.run([
            try job(#"{"op":"append_items","collection":"c","id":\#(nestedID),"items":["x"]}"#, slot: 1),
            try job(#"{"op":"get","collection":"c","id":"g"}"#, slot: 2),
        ])
        let write = try answerIn(outcomes, slot: 1)
        #expect(write.hasPrefix(#"{"ok":true"#) && write.contains(#""version":2"#), "\(write)")
        let get = try answerIn(outcomes, slot: 2)
        #expect(get.hasPrefix(#"{"ok":true,"id":"g","op":"get","collection":"c""#), "\(get)")
        let state = try JSONParser.parse(Array(get.utf8.dropLast()))
        #expect(try EventDecoder.outline(state["sections"]).flatMap { $0.items.map(\.id.text) } == ["a", "x"])
    }

    /// Anyone who may publish on the log's subjects can put anything there. A message that
    /// cannot be applied is skipped by every daemon alike, also by one that joins later and
    /// replays it (a batch at version 0 among them, which must not trap a follower), and the
    /// collection's owner goes on writing after it.
    @Test func messagesThatCannotBeAppliedAreSkippedAlikeEverywhere() throws {
        let cluster = MemoryCluster()
        let a = cluster.join("a")
        let b = cluster.join("b")
        let reference = ApplyEngine()
        let writes = [
            #"{"op":"append_sections","collection":"c","sections":[{"id":"s","items":["x"]}]}"#,
            #"{"op":"append_items","collection":"c","items":["y"]}"#,
            #"{"op":"update_items","collection":"c","items":[{"id":"x","data":{"n":1}}]}"#,
        ]
        #expect(try a.answer(writes[0], slot: 0) == answerIn(reference.process([job(writes[0], slot: 0)]), slot: 0))
        let poison: [(subject: String, records: [LogRecord])] = [
            ("c", [.batch(collection: "c", version: 0, writes: [])]),
            ("c", [.batch(collection: "c", version: .max, writes: [])]),
            ("c", [.batch(collection: "c", version: 7, writes: [Array(#"{"op":"drop","collection":"c"}"#.utf8)])]),
            ("c", [.batch(collection: "other", version: 2, writes: [])]),
            // Last: a message without records must move the log position too, or the owner's
            // next append is fenced by it.
            ("c", []),
        ]
        for message in poison { cluster.inject(message.records, on: message.subject) }
        for (slot, line) in writes.enumerated().dropFirst() {
            let daemon = slot == 1 ? b : a
            #expect(
                try daemon.answer(line, slot: UInt64(slot))
                    == answerIn(reference.process([job(line, slot: UInt64(slot))]), slot: UInt64(slot)))
        }
        let late = cluster.join("late")
        let truth = try #require(reference.checkpointEntries().first)
        for daemon in [a, b, late] {
            _ = daemon.applier.run([])
            let held = try #require(daemon.engine.checkpointEntries().first)
            #expect(held.version == truth.version && held.epoch == a.engine.position(of: "c")?.epoch, "\(daemon.node)")
            #expect(Digest(of: held.snapshot) == Digest(of: truth.snapshot), "\(daemon.node)")
            let statistics = try daemon.applier.run([job(#"{"op":"stats"}"#, slot: 99)]).compactMap { outcome in
                if case .statistics(_, _, let statistics) = outcome { statistics.backbone } else { nil }
            }
            #expect(statistics.map(\.logSkipped) == [UInt64(poison.count)], "\(daemon.node)")
        }
    }

    // MARK: - Writes

    private func randomWrite(_ step: Int, using generator: inout SeededGenerator) -> String {
        let item = "i\(generator.next() % 40)"
        let section = "s\(generator.next() % 4)"
        switch step == 0 ? 0 : generator.next() % 20 {
        case 0...2: return #"{"op":"append_sections","collection":"c","sections":[{"id":"\#(section)","items":[]}]}"#
        case 3...9: return #"{"op":"append_items","collection":"c","section":"\#(section)","items":["\#(item)"]}"#
        case 10...12: return #"{"op":"delete_items","collection":"c","items":["\#(item)"]}"#
        case 13...15:
            return #"{"op":"update_items","collection":"c","items":[{"id":"\#(item)","data":{"n":\#(step)}}]}"#
        case 16...18:
            return #"{"op":"move_item","collection":"c","item":"\#(item)","after":"i\#(generator.next() % 40)"}"#
        default: return #"{"op":"drop","collection":"c"}"#
        }
    }
}

private func job(_ line: String, slot: UInt64) throws -> Job {
    .request(try RequestParser().parse(line: Array(line.utf8)), ResponseAddress(connection: 1, slot: slot))
}

/// The answer to the request in `slot` among a run's outcomes.
private func answerIn(_ outcomes: [Outcome], slot: UInt64) throws -> String {
    for outcome in outcomes {
        switch outcome {
        case .response(let address, let response) where address.slot == slot:
            return String(decoding: response.bytes.bytes, as: UTF8.self)
        case .acknowledged(let address, let response, _, let writes)
        where (address.slot..<address.slot + UInt64(writes)).contains(slot):
            return String(decoding: response.bytes.bytes, as: UTF8.self)
        case .relayed(let address, let bytes) where address.slot == slot:
            return String(decoding: bytes.bytes, as: UTF8.self)
        default: continue
        }
    }
    throw AnswerMissing(slot: slot)
}

private struct AnswerMissing: Error {
    let slot: UInt64
}

/// splitmix64: the same writes on every run.
private struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// One daemon of the model: its engine, its applier, its view of the cluster, and every
/// outcome its applier produced.
final class ModelDaemon {
    let node: String
    let engine = ApplyEngine()
    let backbone: MemoryBackbone
    let applier: SharedLogApplier
    var outcomes: [Outcome] = []

    init(node: String, cluster: MemoryCluster, mayOwn: Bool) {
        self.node = node
        backbone = MemoryBackbone(node: node, cluster: cluster, mayOwn: mayOwn)
        applier = SharedLogApplier(
            engine: engine, backbone: backbone, node: node, snapshotEvery: cluster.snapshotEvery,
            logger: Logger(label: "test"))
    }

    func answer(_ line: String, slot: UInt64) throws -> String {
        let produced = applier.run([try job(line, slot: slot)])
        outcomes += produced
        return try answerIn(produced, slot: slot)
    }

    /// Every version this daemon published, applied in order by the strict reference applier
    /// (`StrictApplier`, which checks each entry's identifier and the lists' order) with each
    /// event's digest checked against `ReferenceDigest`, ends at `final` (nil: dropped): events
    /// compose, with no gap.
    func expectEventsCompose(to final: Snapshot?) throws {
        var held: (version: UInt64, state: PlainState)?
        for outcome in outcomes {
            switch outcome {
            case .published(_, let from, let to, let encoded, _):
                // The collection as it was before its first published version here: empty.
                let before = held ?? (0, [])
                try #require(from == before.version, "published from \(from), holding \(before.version)")
                let event = try EventDecoder.event(JSONParser.parse(encoded.bytes.bytes, maximumDepth: 1024))
                guard case .changeset(let eventFrom, let version, let changeset, _, let digest) = event else {
                    Issue.record("version \(to) was published as \(event), not a changeset")
                    return
                }
                #expect(eventFrom == from && version == to)
                let state = try StrictApplier.apply(changeset, to: before.state)
                #expect(digest == ReferenceDigest.of(state), "the digest of version \(to)")
                held = (to, state)
            case .dropped:
                held = nil
            default:
                continue
            }
        }
        if let final {
            #expect(held?.state == plain(final), "the events end where the engine is")
        } else {
            #expect(held == nil, "the collection was dropped last, yet its events go on")
        }
    }
}

/// What NATS JetStream is to the real backbone, in memory: one log where an append names the
/// collection's last sequence it has seen, one lease per collection, and requests to a daemon
/// served at once (by running its applier).
final class MemoryCluster {
    struct Message {
        let sequence: UInt64
        let collection: String
        let records: [LogRecord]
        let appender: String
    }

    let snapshotEvery: Int
    var log: [Message] = []
    var lastSequence: [String: UInt64] = [:]
    var nextSequence: UInt64 = 1
    var leases: [String: String] = [:]
    var snapshots: [String: [UInt8]] = [:]
    var daemons: [String: ModelDaemon] = [:]
    /// Replaces each forwarded batch's answer on its way back (someone else answering the
    /// request's inbox).
    var forgeAnswers: ((ForwardResult) -> ForwardResult)?

    init(snapshotEvery: Int = 1000) {
        self.snapshotEvery = snapshotEvery
    }

    func join(_ node: String, mayOwn: Bool = true) -> ModelDaemon {
        let daemon = ModelDaemon(node: node, cluster: self, mayOwn: mayOwn)
        daemons[node] = daemon
        daemon.outcomes += daemon.applier.join(
            BackboneStart(snapshots: Array(snapshots.values), logEnd: nextSequence - 1))
        return daemon
    }

    /// A message put on a collection's subject by someone who is no daemon: stored as it is.
    func inject(_ records: [LogRecord], on collection: String) {
        log.append(.init(sequence: nextSequence, collection: collection, records: records, appender: "intruder"))
        lastSequence[collection] = nextSequence
        nextSequence += 1
    }

    /// The daemon stops answering, and its leases end.
    func kill(_ node: String) {
        daemons[node] = nil
        leases = leases.filter { $0.value != node }
    }
}

final class MemoryBackbone: Backbone, @unchecked Sendable {
    let node: String
    private unowned let cluster: MemoryCluster
    private let mayOwn: Bool
    private var taken: UInt64 = 0
    private var forwarded: [ForwardedBatch] = []
    /// What this daemon believes it owns (the real backbone's lease table with its deadlines).
    private var owned: Set<String> = []
    /// While set, log messages do not arrive until this daemon waits for them.
    var holdsBackArrivals = false

    init(node: String, cluster: MemoryCluster, mayOwn: Bool) {
        self.node = node
        self.cluster = cluster
        self.mayOwn = mayOwn
    }

    func believesItOwns(_ collection: String) -> Bool { owned.contains(collection) }

    var ownedCollections: Int { owned.count }

    var logBehind: UInt64 { 0 }

    func start(wake: @escaping @Sendable () -> Void) throws -> BackboneStart {
        BackboneStart(snapshots: Array(cluster.snapshots.values), logEnd: cluster.nextSequence - 1)
    }

    func takeArrivals() -> BackboneArrivals {
        defer { forwarded = [] }
        guard !holdsBackArrivals else { return BackboneArrivals(forwarded: forwarded) }
        let new = cluster.log.filter { $0.sequence > taken }
        taken = cluster.nextSequence - 1
        return BackboneArrivals(
            log: new.map { LogMessage(sequence: $0.sequence, collection: $0.collection, records: $0.records) },
            forwarded: forwarded)
    }

    func waitForArrivals(timeoutMilliseconds: Int) {
        holdsBackArrivals = false
    }

    func claim(_ collection: String) -> Claim {
        if owned.contains(collection) { return .owned(catchUpTo: nil) }
        switch cluster.leases[collection] {
        case nil where mayOwn, node?:
            cluster.leases[collection] = node
            owned.insert(collection)
            return .owned(catchUpTo: cluster.lastSequence[collection] ?? 0)
        case nil:
            return .notOwned(reason: "nobody owns it")
        case let holder?:
            return .heldBy(holder)
        }
    }

    func release(_ collection: String) {
        owned.remove(collection)
    }

    func append(_ records: [LogRecord], of collection: String, after: UInt64, messageID: String) -> AppendResult {
        guard cluster.lastSequence[collection] ?? 0 == after else { return .fenced }
        let sequence = cluster.nextSequence
        cluster.nextSequence += 1
        cluster.log.append(.init(sequence: sequence, collection: collection, records: records, appender: node))
        cluster.lastSequence[collection] = sequence
        return .stored(sequence: sequence)
    }

    func forward(
        _ lines: [[UInt8]], of collection: String, ownerHint: String?, serving: () -> Void
    ) -> ForwardResult {
        let result = forwardToOwner(lines, of: collection, ownerHint: ownerHint)
        return cluster.forgeAnswers.map { $0(result) } ?? result
    }

    private func forwardToOwner(_ lines: [[UInt8]], of collection: String, ownerHint: String?) -> ForwardResult {
        var hint = ownerHint
        for _ in 0..<4 {
            let target =
                hint.flatMap { cluster.daemons[$0] } ?? cluster.leases[collection].flatMap { cluster.daemons[$0] }
                ?? cluster.daemons.values.sorted { $0.node < $1.node }.first { $0.backbone.mayOwn }
            guard let target else { return .unavailable("no daemon answers") }
            let reply = ReplyBox()
            target.backbone.forwarded.append(ForwardedBatch(lines: lines) { reply.value = $0 })
            target.outcomes += target.applier.run([])
            switch reply.value {
            case .answered(let sequence, let responses)?: return .answered(sequence: sequence, responses: responses)
            case .notOwner(let owner)?: hint = owner
            case .unavailable(let reason)?: return .unavailable(reason)
            case nil: return .unavailable("no reply")
            }
        }
        return .unavailable("ownership keeps moving")
    }

    func saveSnapshot(_ snapshot: [UInt8], of collection: String, at sequence: UInt64) {
        cluster.snapshots[collection] = snapshot
        cluster.log.removeAll { $0.collection == collection && $0.sequence < sequence }
    }

    func loadSnapshot(of collection: String) throws -> [UInt8]? { cluster.snapshots[collection] }

    func logEnd() throws -> UInt64 { cluster.nextSequence - 1 }

    func stop() {}
}

private final class ReplyBox: @unchecked Sendable {
    var value: ForwardReply?
}

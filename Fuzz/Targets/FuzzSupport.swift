import DiffcastClient
import DiffcastCore
import DiffcastWire
import Logging

@testable import DiffcastEngine
@testable import DiffcastStorage

#if canImport(Glibc)
    import Glibc
#endif

/// What every fuzz target shares: how an input is cut into parts, how a broken invariant is
/// reported (a trap, which libFuzzer saves as a crash and which ends a replay in `make test`),
/// and scratch files.
public enum Fuzz {
    /// `bytes` cut at every `separator` (empty parts kept, so every part has a place).
    public static func parts(_ bytes: some Collection<UInt8>, separator: UInt8) -> [[UInt8]] {
        bytes.split(separator: separator, omittingEmptySubsequences: false).map { Array($0) }
    }

    /// Where the input being run comes from, when its runner says so (the replay suite names
    /// each file; libFuzzer keeps the input that crashed on its own): a failure names it.
    @TaskLocal public static var input: String?

    /// A broken invariant: a trap with the reason, so libFuzzer keeps the input as a crash.
    public static func failure(_ what: String, file: StaticString = #fileID, line: UInt = #line) -> Never {
        let source = input.map { " (input \($0))" } ?? ""
        fatalError("fuzz oracle\(source): \(what)", file: file, line: line)
    }

    /// A logger that drops everything (the code under test logs rejected input).
    public static let silentLogger = Logger(label: "fuzz", factory: { _ in SwiftLogNoOpLogHandler() })

    /// Epochs `e1`, `e2`, … so that runs are reproducible.
    public static func countingEpochs() -> () -> String {
        final class Counter { var value = 0 }
        let counter = Counter()
        return {
            counter.value += 1
            return "e\(counter.value)"
        }
    }

    /// The scratch directory of this process: in `DIFFCAST_FUZZ_SCRATCH` when set
    /// (scripts/fuzz.sh sets it and removes it), else on tmpfs, else in `TMPDIR`. One per
    /// process, so inputs that use it run one at a time.
    public static let scratchPath: String = {
        let base =
            getenv("DIFFCAST_FUZZ_SCRATCH").map { String(cString: $0) }
            ?? (access("/dev/shm", W_OK) == 0 ? "/dev/shm" : (getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp"))
        return "\(base)/diffcast-fuzz-\(getpid())"
    }()

    /// `scratchPath`, made if needed and emptied: what a target writes its files to.
    public static func scratchDirectory() -> String {
        let path = scratchPath
        if mkdir(path, 0o700) != 0 && errno != EEXIST { failure("cannot make \(path)") }
        for name in (try? FileIO.listDirectory(path)) ?? [] { unlink(path + "/" + name) }
        return path
    }

    /// Removes `scratchPath` and what is in it (a runner that is not libFuzzer under
    /// scripts/fuzz.sh, which removes the whole `DIFFCAST_FUZZ_SCRATCH`, calls it when done).
    public static func removeScratchDirectory() {
        for name in (try? FileIO.listDirectory(scratchPath)) ?? [] { unlink(scratchPath + "/" + name) }
        rmdir(scratchPath)
    }

    /// Writes a whole file (creating or truncating it), with the store's own file calls.
    public static func write(_ bytes: [UInt8], to path: String) {
        do {
            let descriptor = try FileIO.open(path, O_WRONLY | O_CREAT | O_TRUNC, mode: 0o600)
            defer { close(descriptor) }
            try FileIO.writeAll(descriptor, bytes, path: path)
        } catch {
            failure("cannot write \(path): \(error)")
        }
    }
}

/// A request, as the daemon makes it from a line (`nil` when it does not parse).
public func parseRequest(_ line: [UInt8], limits: RequestLimits = RequestLimits()) -> Request? {
    try? RequestParser(limits: limits).parse(line: line)
}

/// What a state holds, compared across engines: name, epoch, version and digest of each collection.
public struct Summary: Equatable, CustomStringConvertible {
    public var entries: [String]

    public init(_ engine: ApplyEngine) {
        entries = engine.checkpointEntries().map { entry in
            "\(entry.name) \(entry.epoch) v\(entry.version) \(Digest(of: entry.snapshot))"
        }
    }

    public var description: String { entries.joined(separator: "; ") }
}

/// Checks the events an engine publishes the way a subscriber does: a `CollectionMirror` per
/// collection, fed every event, must compute the digest each event carries (else the daemon
/// sent a changeset that does not lead to its own state). Windows the input subscribes to are
/// followed too, a mirror per window group: every windowed event must lead to its digest, and
/// to the view of the whole mirror at the range the event names.
public final class EventOracle {
    let engine: ApplyEngine
    public private(set) var mirrors: [String: CollectionMirror] = [:]
    /// The view each window group's subscribers hold, by group.
    var windowMirrors: [WindowGroupID: (collection: String, mirror: CollectionMirror)] = [:]

    /// What `reset(to:)` puts back.
    public struct Saved {
        let mirrors: [String: CollectionMirror]
        let windowMirrors: [WindowGroupID: (collection: String, mirror: CollectionMirror)]
    }

    public var saved: Saved { Saved(mirrors: mirrors, windowMirrors: windowMirrors) }
    /// Each collection's mirror at the versions it held, for checking catch-up changesets.
    var history: [String: [UInt64: CollectionMirror]] = [:]
    private var slot: UInt64 = 0
    /// The oracle's own connection number (the engine's outcomes for it are not the input's).
    static let connection: ConnectionID = 1 << 40

    /// Whether a collection at version 0 is empty, so that a mirror can follow it from its
    /// first event without subscribing (true of an engine that only takes requests; a snapshot
    /// adopted from a shared log may put anything at version 0).
    let versionZeroIsEmpty: Bool

    public init(engine: ApplyEngine, versionZeroIsEmpty: Bool = false) {
        self.engine = engine
        self.versionZeroIsEmpty = versionZeroIsEmpty
    }

    /// Starts following a collection, when it exists and is not followed yet, with a
    /// `subscribe` of the oracle's own (the snapshot event it gets is checked too).
    public func follow(_ name: String) {
        guard mirrors[name] == nil, engine.holds(name) else { return }
        let request = Request(id: nil, op: "subscribe", command: .subscribe(collection: name, since: nil, epoch: nil))
        slot += 1
        let outcomes = engine.process([.request(request, ResponseAddress(connection: Self.connection, slot: slot))])
        _ = engine.commitLastBatch()
        for case .subscribed(_, let collection, let version, let event?, _, _) in outcomes where collection == name {
            var mirror = CollectionMirror()
            feed(&mirror, event.bytes.bytes, what: "the snapshot of '\(name)' at subscribe")
            guard mirror.version == version else { Fuzz.failure("snapshot of '\(name)' is not at \(version)") }
            remember(mirror, of: name)
        }
    }

    /// Puts the mirrors back as they were (after a batch was rolled back, its events are never
    /// delivered).
    public func reset(to saved: Saved) {
        mirrors = saved.mirrors
        windowMirrors = saved.windowMirrors
    }

    /// Feeds the events among `outcomes` to the mirrors.
    public func check(_ outcomes: [Outcome]) {
        for outcome in outcomes {
            switch outcome {
            case .published(let name, let from, let to, let event, let windows):
                defer { checkWindows(windows, of: name, at: to) }
                if mirrors[name] == nil, versionZeroIsEmpty, from == 0 {
                    var empty = CollectionMirror()
                    let snapshot =
                        #"{"event":"snapshot","version":0,"sections":[],"digest":"\#(Digest(of: Snapshot()))"}"#
                    feed(&empty, Array(snapshot.utf8) + [UInt8(ascii: "\n")], what: "an empty snapshot")
                    remember(empty, of: name)
                }
                guard var mirror = mirrors[name] else { continue }
                guard mirror.version == from else {
                    Fuzz.failure("'\(name)' published \(from)->\(to) while its subscriber holds \(mirror.version ?? 0)")
                }
                feed(&mirror, event.bytes.bytes, what: "event \(from)->\(to) of '\(name)'")
                guard mirror.version == to else { Fuzz.failure("event of '\(name)' leads to \(mirror.version ?? 0)") }
                remember(mirror, of: name)
            case .dropped(let name):
                mirrors[name] = nil
                history[name] = nil
                windowMirrors = windowMirrors.filter { $0.value.collection != name }
            case .subscribed(_, let name, let version, let event?, _, let window?):
                // A windowed subscribe of the input's: the first subscriber of a group starts its
                // mirror; a later one's snapshot must show what the group's mirror holds.
                var mirror = CollectionMirror()
                feed(&mirror, event.bytes.bytes, what: "windowed snapshot of '\(name)'")
                guard mirror.version == version, mirror.window?.range == window.range else {
                    Fuzz.failure("windowed snapshot of '\(name)' is not at \(version) \(window.range)")
                }
                if let held = windowMirrors[window.group], held.mirror.version == version,
                    held.mirror.sections != mirror.sections
                {
                    Fuzz.failure("two subscribers of one window of '\(name)' are shown different views")
                }
                windowMirrors[window.group] = (name, mirror)
            case .subscribed(let address, let name, let version, let event?, _, _)
            where address.connection != Self.connection:
                // A subscribe of the input's, with or without `since`: its catch-up event must
                // lead from what the subscriber said it holds to `version`.
                let value = parse(event.bytes.bytes, what: "catch-up event of '\(name)'")
                var mirror: CollectionMirror
                if case .string("changeset") = value["event"] {
                    guard case .number(let text) = value["from"], let from = UInt64(text),
                        let held = history[name]?[from]
                    else { continue }
                    mirror = held
                } else {
                    mirror = CollectionMirror()
                }
                feed(&mirror, event.bytes.bytes, what: "catch-up event of '\(name)'")
                guard mirror.version == version else { Fuzz.failure("catch-up of '\(name)' is not at \(version)") }
            default:
                break
            }
        }
    }

    /// Feeds each window event to its group's mirror (from the version that mirror holds), and
    /// compares the view it leads to with the whole mirror's view at the event's range.
    private func checkWindows(_ windows: [WindowDelivery], of name: String, at version: UInt64) {
        for delivery in windows {
            guard var (collection, mirror) = windowMirrors[delivery.group], collection == name,
                let from = mirror.version
            else { continue }
            feed(&mirror, delivery.event.bytes(from: from), what: "window event \(from)->\(version) of '\(name)'")
            guard mirror.window?.range == delivery.range else {
                Fuzz.failure(
                    "window event of '\(name)' names \(String(describing: mirror.window)), not \(delivery.range)")
            }
            if let whole = mirrors[name], whole.version == version,
                whole.snapshot.view(delivery.range).outline != mirror.sections
            {
                Fuzz.failure("window event of '\(name)' at \(version) leads to another view than the whole mirror's")
            }
            collection = name
            windowMirrors[delivery.group] = (collection, mirror)
        }
    }

    private func remember(_ mirror: CollectionMirror, of name: String) {
        mirrors[name] = mirror
        guard let version = mirror.version else { return }
        var kept = history[name, default: [:]]
        kept[version] = mirror
        if kept.count > 80, let oldest = kept.keys.min() { kept[oldest] = nil }
        history[name] = kept
    }

    private func parse(_ bytes: [UInt8], what: String) -> JSONValue {
        guard bytes.last == UInt8(ascii: "\n"), bytes.dropLast().firstIndex(of: UInt8(ascii: "\n")) == nil else {
            Fuzz.failure("\(what) is not one line: \(String(decoding: bytes, as: UTF8.self))")
        }
        do {
            return try JSONParser.parse(bytes)
        } catch {
            Fuzz.failure("\(what) is not JSON (\(error)): \(String(decoding: bytes, as: UTF8.self))")
        }
    }

    private func feed(_ mirror: inout CollectionMirror, _ bytes: [UInt8], what: String) {
        let value = parse(bytes, what: what)
        do {
            try mirror.feed(value)
        } catch {
            Fuzz.failure("\(what) does not apply: \(error): \(String(decoding: bytes, as: UTF8.self))")
        }
    }
}

/// A daemon of a backbone that follows the shared log, as the shared-log targets drive it: its
/// engine, the stand-in for NATS, the applier between them, and a mirror of every event the
/// engine publishes.
public final class SharedLogFollower {
    public let engine = ApplyEngine(
        historyLimits: HistoryLimits(versions: 4, items: 256), makeEpoch: Fuzz.countingEpochs())
    public let backbone = FakeBackbone(node: "follower")
    public let oracle: EventOracle
    private let applier: SharedLogApplier

    public init() {
        applier = SharedLogApplier(
            engine: engine, backbone: backbone, node: "follower", snapshotEvery: 1000, logger: Fuzz.silentLogger)
        oracle = EventOracle(engine: engine)
    }

    /// Joins with `snapshots` handed over, the log ending where the last of them says but at
    /// `lastSequence` at most (a snapshot past the log's end is refused); returns that end.
    public func join(_ snapshots: [[UInt8]], lastSequence: UInt64) -> UInt64 {
        let logEnd = min(snapshots.compactMap { SharedLogSnapshot(decoding: $0)?.logSequence }.max() ?? 0, lastSequence)
        backbone.nextSequence = logEnd
        oracle.check(applier.join(BackboneStart(snapshots: snapshots, logEnd: logEnd)))
        return logEnd
    }

    /// Delivers one log message in a drain of its own; the mirror follows its collections.
    public func deliver(_ records: [LogRecord], sequence: UInt64, collection: String?) {
        for name in Set(records.map(\.collection)) { oracle.follow(name) }
        backbone.arrivals.log = [LogMessage(sequence: sequence, collection: collection, records: records)]
        backbone.nextSequence = sequence
        oracle.check(applier.run([]))
    }
}

/// A stand-in for NATS: the shared log, leases and forwarding as the fuzz input says.
public final class FakeBackbone: Backbone, @unchecked Sendable {
    public let node: String
    public var ownedCollections: Int { 0 }
    public var logBehind: UInt64 { 0 }
    /// What `takeArrivals` hands out next.
    public var arrivals = BackboneArrivals()
    /// What `loadSnapshot` returns (any collection).
    public var snapshot: [UInt8]?
    /// Snapshots the engine saved, newest last.
    public var savedSnapshots: [(name: String, sequence: UInt64, bytes: [UInt8])] = []
    /// Who may write.
    public var claim: Claim = .owned(catchUpTo: nil)
    /// What `forward` answers, given the lines forwarded.
    public var answer: ([[UInt8]]) -> ForwardResult = { _ in .unavailable("no owner") }
    /// Records appended to the log (as the bytes NATS would carry), with their sequences.
    public var appended: [(sequence: UInt64, payload: [UInt8])] = []
    public var nextSequence: UInt64 = 1
    /// The log sequence `waitForArrivals` brings the follower to (an empty message).
    private var awaited: UInt64 = 0

    public init(node: String) {
        self.node = node
    }

    public func start(wake: @escaping @Sendable () -> Void) throws -> BackboneStart {
        BackboneStart(snapshots: [], logEnd: 0)
    }

    public func takeArrivals() -> BackboneArrivals {
        defer { arrivals = BackboneArrivals() }
        return arrivals
    }

    public func waitForArrivals(timeoutMilliseconds: Int) {
        // Whatever the follower waits for arrives at once: an empty message at that sequence.
        arrivals.log.append(LogMessage(sequence: max(awaited, nextSequence), collection: nil, records: []))
    }

    public func claim(_ collection: String) -> Claim { claim }

    public func release(_ collection: String) {}

    public func append(_ records: [LogRecord], of collection: String, after: UInt64, messageID: String)
        -> AppendResult
    {
        let sequence = nextSequence
        nextSequence += 1
        appended.append((sequence, LogRecord.payload(of: records)))
        return .stored(sequence: sequence)
    }

    public func forward(
        _ lines: [[UInt8]], of collection: String, ownerHint: String?, serving: () -> Void
    ) -> ForwardResult {
        serving()
        let result = answer(lines)
        if case .answered(let sequence, _) = result { awaited = sequence }
        return result
    }

    public func saveSnapshot(_ snapshot: [UInt8], of collection: String, at sequence: UInt64) {
        savedSnapshots.append((collection, sequence, snapshot))
    }

    public func loadSnapshot(of collection: String) -> [UInt8]? { snapshot }

    /// What `logEnd` answers: a snapshot naming a later message is refused.
    public var logEndSequence: UInt64 = 1 << 32

    public func logEnd() -> UInt64 { logEndSequence }

    public func stop() {}
}

/// A box for what a `@Sendable` reply closure hands back.
public final class Box<Value>: @unchecked Sendable {
    public var value: Value
    public init(_ value: Value) { self.value = value }
}

/// A write the daemon could get next for a collection (a new section: the version moves on),
/// as a request with its line; the collection name is whatever a state held, valid or not.
public func probeWrite(to name: String) -> Request {
    var line = JSONOutput()
    line.appendRaw(#"{"op":"append_sections","collection":"#)
    line.append(string: name)
    line.appendRaw(#","sections":[{"id":"fuzz-probe"}]}"#)
    return Request(
        id: nil, op: "append_sections",
        command: .write(collection: name, .appendSections([SectionOutline(id: "fuzz-probe")])), line: line.bytes)
}

/// Runs `probeWrite` on every collection of `engine`; `log` gets each batch's records, as the
/// daemon's state store does (when it throws, the batch is rolled back).
public func probeEveryCollection(of engine: ApplyEngine, log: ([LogRecord]) throws -> Void = { _ in }) {
    var slot: UInt64 = 0
    for entry in engine.checkpointEntries() {
        slot += 1
        _ = engine.process([.request(probeWrite(to: entry.name), ResponseAddress(connection: 1, slot: slot))])
        do {
            try log(engine.takeLogRecords())
            _ = engine.commitLastBatch()
        } catch {
            engine.rollBackLastBatch()
        }
    }
}

/// A daemon's life on a state directory, from what is in it: recovery (`StateStore.recover`);
/// when that works, a write to each collection logged to the store, a checkpoint
/// (`StateStore.checkpoint`), and a restart, which must recover the same state.
public func recoverAndGoOn(_ directory: String) {
    var options = StateStore.Options()
    options.sync = .never
    let engine = ApplyEngine(makeEpoch: Fuzz.countingEpochs())
    do {
        let store = try StateStore(directory: directory, options: options, logger: Fuzz.silentLogger)
        do {
            try store.recover(into: engine)
        } catch {
            return
        }
        probeEveryCollection(of: engine) { try store.append($0) }
        checkCheckpointRoundTrip(of: engine, "the recovered engine")
        try store.checkpoint(engine)
    } catch {
        Fuzz.failure("a recovered state directory does not take a write and a checkpoint: \(error)")
    }
    let restarted = ApplyEngine()
    do {
        let store = try StateStore(directory: directory, options: options, logger: Fuzz.silentLogger)
        try store.recover(into: restarted)
    } catch {
        Fuzz.failure("a state directory does not recover after its own checkpoint: \(error)")
    }
    guard Summary(restarted) == Summary(engine) else {
        Fuzz.failure("after a checkpoint and a restart [\(Summary(restarted))], before [\(Summary(engine))]")
    }
}

/// A checkpoint of `engine` must decode and restore to the same state, earlier versions included.
public func checkCheckpointRoundTrip(of engine: ApplyEngine, _ what: String) {
    let entries = engine.checkpointEntries()
    let checkpoint = CheckpointFile.encode(entries, coveredGeneration: 1, nextSequence: 1)
    let restored = ApplyEngine()
    do {
        for entry in try CheckpointFile.decode(checkpoint, path: "checkpoint.json").collections {
            try restored.restore(
                collection: entry.name, epoch: entry.epoch, version: entry.version, sections: entry.sections,
                history: entry.history)
        }
    } catch {
        Fuzz.failure("a checkpoint of \(what) does not restore: \(error)")
    }
    guard Summary(restored) == Summary(engine) else {
        Fuzz.failure("checkpoint gives [\(Summary(restored))], \(what) holds [\(Summary(engine))]")
    }
    for (original, again) in zip(entries, restored.checkpointEntries()) {
        let before = original.history.map { "\($0.version) \(Digest(of: $0.snapshot))" }
        let after = again.history.map { "\($0.version) \(Digest(of: $0.snapshot))" }
        guard before == after else {
            Fuzz.failure("checkpoint of '\(original.name)' gives history \(after), \(what) holds \(before)")
        }
    }
}

import DiffcastCore
import DiffcastWire
import Foundation
import Logging
import Testing

@testable import DiffcastEngine
@testable import DiffcastStorage

/// The three sync policies, counted in the log's fdatasync calls (`syncs`, which `stats`
/// reports as `log_syncs`): `always` once per appended batch, `never` not at all, `interval`
/// only once the interval has passed since the last sync, and then once for everything unsynced.
/// Counted from after `recover`, which makes the log it opens durable whatever the policy.
@Suite struct SyncPolicyTests {
    private static let quiet = Logger(label: "sync") { _ in SwiftLogNoOpLogHandler() }

    /// A store of `policy` in a fresh directory, and a function that appends one batch of one
    /// write to it.
    private static func store(
        _ policy: SyncPolicy, intervalMilliseconds: Int = 100
    ) throws -> (StateStore, append: () throws -> Void) {
        var options = StateStore.Options()
        options.sync = policy
        options.syncIntervalMilliseconds = intervalMilliseconds
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("diffcast-sync-\(UUID().uuidString)").path
        let store = try StateStore(directory: directory, options: options, logger: quiet)
        let engine = ApplyEngine()
        engine.keepsLogRecords = true
        try store.recover(into: engine)
        var slot: UInt64 = 0
        let append = {
            slot += 1
            let line = #"append_sections c {"sections":[{"id":"s\#(slot)","data":\#(slot)}]}"#
            let request = try RequestParser().parse(line: Array(line.utf8))
            _ = engine.process([.request(request, ResponseAddress(connection: 1, slot: slot))])
            let records = engine.takeLogRecords()
            #expect(!records.isEmpty, "a write logs a record")
            try store.append(records)
        }
        return (store, append)
    }

    @Test func alwaysSyncsEveryBatchBeforeItIsAcknowledged() throws {
        let (store, append) = try Self.store(.always)
        let base = store.syncs
        for expected in 1...3 {
            try append()
            #expect(store.syncs == base + UInt64(expected))
        }
    }

    @Test func neverSyncsWhateverIsDue() throws {
        let (store, append) = try Self.store(.never, intervalMilliseconds: 1)
        let base = store.syncs
        try append()
        Thread.sleep(forTimeInterval: 0.01)
        try store.syncIfDue()
        try append()
        #expect(store.syncs == base)
    }

    @Test func intervalWaitsForTheIntervalToPass() throws {
        // An hour: however slow this machine, it has not passed.
        let (store, append) = try Self.store(.interval, intervalMilliseconds: 3_600_000)
        let base = store.syncs
        try append()
        try append()
        try store.syncIfDue()
        #expect(store.syncs == base)
    }

    @Test func intervalSyncsOnceItHasPassedAndOnlyWhatIsUnsynced() throws {
        let (store, append) = try Self.store(.interval, intervalMilliseconds: 1)
        let base = store.syncs
        try append()
        Thread.sleep(forTimeInterval: 0.01)
        // The timer's call (ApplyQueue): the unsynced batch is synced now, if its own append
        // did not (when a millisecond had passed since `recover`).
        try store.syncIfDue()
        let afterFirst = store.syncs
        #expect(afterFirst == base + 1)
        // Nothing new: the next timer's call has nothing to sync.
        Thread.sleep(forTimeInterval: 0.01)
        try store.syncIfDue()
        #expect(store.syncs == afterFirst)
        // A batch appended once the interval has passed is synced by its own append.
        try append()
        #expect(store.syncs == afterFirst + 1)
    }
}

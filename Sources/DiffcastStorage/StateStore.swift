import DiffcastCore
import DiffcastEngine
import DiffcastWire
import Glibc
import Logging

/// When the write-ahead log is flushed to stable storage.
public enum SyncPolicy: String, Sendable, CaseIterable {
    /// fdatasync before any write of the batch is acknowledged (the default).
    case always
    /// fdatasync at most once per interval: a machine crash may lose the last interval's
    /// acknowledged writes; a daemon crash loses nothing.
    case interval
    /// Never fdatasync: a daemon crash loses nothing, a machine crash may lose what the kernel
    /// had not written back.
    case never
}

/// A batch could not be made durable (disk full, quota, I/O error); nothing of it is in the log.
public struct StorageUnavailable: Error, CustomStringConvertible {
    public let description: String
}

/// Keeps the daemon's state in a directory: a write-ahead log of every published batch (one
/// append and at most one fsync per apply-queue batch: group commit) and, from time to time, a
/// checkpoint of every collection after which the older log is dropped.
///
/// Files: `checkpoint.json` (see `CheckpointFile`; written atomically) and `wal-<generation>.log`
/// (records framed by `LogFrame`). Recovery reads and checks everything before it changes any
/// file: only a torn tail of the newest log is cut, after its bytes are kept aside.
public final class StateStore {
    public struct Options: Sendable, Equatable {
        public var sync: SyncPolicy = .always
        public var syncIntervalMilliseconds = 100
        /// A log larger than this is folded into a new checkpoint.
        public var checkpointLogBytes = 64 * 1024 * 1024

        public init() {}
    }

    let directory: String
    public let options: Options
    package let logger: Logger
    private var generation: UInt64 = 1
    private var nextSequence: UInt64 = 1
    private var logDescriptor: Int32 = -1
    /// The open `lock` file whose flock keeps other daemons out while this store lives; the
    /// kernel releases it when the process ends, however it ends.
    private let lockDescriptor: Int32
    private var logBytes = 0
    /// After a failed checkpoint, the log size at which to try again.
    private var checkpointRetryBytes = 0
    private var lastSync = ContinuousClock.now
    private var hasUnsyncedRecords = false
    /// fdatasync calls on the log so far (for `stats`: with `--sync always`, at least one per
    /// acknowledged batch).
    public private(set) var syncs: UInt64 = 0
    /// Called with each log sync's duration, when metrics are on.
    public var recordSyncDuration: (@Sendable (Duration) -> Void)?

    private var checkpointPath: String { directory + "/checkpoint.json" }
    private func logPath(_ generation: UInt64) -> String { directory + "/wal-\(generation).log" }

    public init(directory: String, options: Options, logger: Logger) throws {
        self.directory = directory
        self.options = options
        self.logger = logger
        if mkdir(directory, 0o750) != 0 && errno != EEXIST {
            throw PersistenceError.system("mkdir", path: directory, errno: errno)
        }
        lockDescriptor = try Self.lock(directory)
    }

    deinit {
        if logDescriptor >= 0 { close(logDescriptor) }
        close(lockDescriptor)
    }

    /// Takes the directory's lock, as PostgreSQL's postmaster.pid and etcd's data-directory
    /// flock do: a second daemon on the same directory would checkpoint and remove the first
    /// one's live log. Writes this process's pid into the lock file, for the refusal message.
    private static func lock(_ directory: String) throws -> Int32 {
        let path = directory + "/lock"
        let descriptor = try FileIO.open(path, O_RDWR | O_CREAT)
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            let code = errno
            defer { close(descriptor) }
            guard code == EWOULDBLOCK else { throw PersistenceError.system("flock", path: path, errno: code) }
            var bytes = [UInt8](repeating: 0, count: 32)
            let count = pread(descriptor, &bytes, bytes.count, 0)
            let digits = bytes.prefix(max(count, 0)).prefix { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
            let holder = String(decoding: digits, as: UTF8.self)
            throw PersistenceError.locked(directory: directory, holder: holder.isEmpty ? nil : holder)
        }
        let pid = Array("\(getpid())\n".utf8)
        guard ftruncate(descriptor, 0) == 0, pwrite(descriptor, pid, pid.count, 0) == pid.count else {
            let code = errno
            close(descriptor)
            throw PersistenceError.system("writing", path: path, errno: code)
        }
        return descriptor
    }

    // MARK: - Recovery

    /// Loads the checkpoint and replays the logs after it into `engine`. Any damage other than a
    /// torn tail of the newest log throws, naming the file and offset, with no file changed.
    public func recover(into engine: ApplyEngine) throws {
        let started = ContinuousClock.now
        let state = try Self.read(directory)
        let records = try Self.load(state, into: engine)
        // Everything checked out: now, and only now, change files.
        if let torn = state.tornTail {
            try keepAside(torn)
        }
        for path in state.coveredLogs { unlink(path) }
        generation = state.appendGeneration
        nextSequence = state.nextSequence
        try openLog()
        logger.info(
            "state recovered",
            metadata: [
                "directory": "\(directory)", "collections": "\(engine.collectionCount)", "log_records": "\(records)",
                "next_record": "\(nextSequence)", "took": "\(ContinuousClock.now - started)",
            ])
    }

    /// Checks a state directory as `recover` would, changing nothing; returns a summary.
    public static func verify(directory: String) throws -> String {
        let state = try read(directory)
        guard state.checkpoint != nil || !state.logs.isEmpty || !state.coveredLogs.isEmpty else {
            throw PersistenceError.notAStateDirectory(directory)
        }
        let engine = ApplyEngine()
        let records = try load(state, into: engine)
        var summary =
            "\(directory): checkpoint \(state.checkpoint.map { "covering wal-\($0.coveredGeneration)" } ?? "none"), "
            + "\(records) log records replayed, \(engine.collectionCount) collections, next record \(state.nextSequence)"
        if let torn = state.tornTail {
            summary +=
                "; a torn tail (\(torn.damage)) at offset \(torn.offset) of \(torn.path) would be cut at start "
                + "and kept aside as \(torn.asidePath)"
        }
        return summary
    }

    /// What a state directory holds, read and checked but not yet applied.
    private struct DirectoryState {
        var checkpoint: CheckpointFile.Contents?
        var logs: [(path: String, records: [LogFrame.Record])] = []
        var tornTail: TornTail?
        var coveredLogs: [String] = []
        var appendGeneration: UInt64 = 1
        var nextSequence: UInt64 = 1
    }

    /// The damaged end of the newest log, which a crash during an append can leave.
    private struct TornTail {
        var path: String
        var offset: Int
        var damage: LogFrame.Damage
        var bytes: ArraySlice<UInt8>
        var asidePath: String { path + ".torn-\(offset)" }
    }

    /// Reads and checks a state directory: the checkpoint, the log files that follow it without
    /// a gap, and their records in sequence; a damaged tail of the last file is a torn tail, any
    /// other damage an error naming the file and offset.
    private static func read(_ directory: String) throws -> DirectoryState {
        var state = DirectoryState()
        let checkpointPath = directory + "/checkpoint.json"
        if access(checkpointPath, F_OK) == 0 {
            state.checkpoint = try CheckpointFile.decode(try FileIO.readAll(checkpointPath), path: checkpointPath)
        }
        let covered = state.checkpoint?.coveredGeneration ?? 0
        let generations = try FileIO.listDirectory(directory).compactMap { name -> UInt64? in
            guard name.hasPrefix("wal-"), name.hasSuffix(".log") else { return nil }
            return UInt64(counter: String(name.dropFirst(4).dropLast(4)))
        }.sorted()
        state.coveredLogs = generations.filter { $0 <= covered }.map { directory + "/wal-\($0).log" }
        let uncovered = generations.filter { $0 > covered }
        try checkLogsFollowEachOther(
            directory, checkpoint: state.checkpoint, generations: generations, uncovered: uncovered)
        var sequence = state.checkpoint?.nextSequence ?? 1
        for (index, generation) in uncovered.enumerated() {
            let path = directory + "/wal-\(generation).log"
            let (records, tornTail) = try readRecords(
                of: path, from: &sequence, isLast: index == uncovered.count - 1)
            state.logs.append((path, records))
            if let tornTail { state.tornTail = tornTail }
        }
        state.appendGeneration = uncovered.last ?? (covered + 1)
        state.nextSequence = sequence
        return state
    }

    /// Refuses a directory whose log files do not follow the checkpoint (or the start) without
    /// a gap, naming the missing file.
    private static func checkLogsFollowEachOther(
        _ directory: String, checkpoint: CheckpointFile.Contents?, generations: [UInt64], uncovered: [UInt64]
    ) throws {
        let covered = checkpoint?.coveredGeneration ?? 0
        if checkpoint == nil, let first = uncovered.first, first != 1 {
            throw PersistenceError.missingFile(
                path: directory + "/checkpoint.json", reason: "the log starts at wal-\(first).log, after a checkpoint")
        }
        var expectedGeneration = covered + 1
        for generation in uncovered {
            guard generation == expectedGeneration else {
                throw PersistenceError.missingFile(
                    path: directory + "/wal-\(expectedGeneration).log",
                    reason: "wal-\(generation).log exists, so the log before it is missing")
            }
            expectedGeneration += 1
        }
        if checkpoint != nil, uncovered.isEmpty, !generations.contains(covered) {
            // A checkpoint is written only after the log after it has been created.
            throw PersistenceError.missingFile(
                path: directory + "/wal-\(covered + 1).log",
                reason: "the checkpoint covers wal-\(covered).log and the log after it is gone")
        }
    }

    /// The records of one log file, numbered on from `sequence`. Damage is a torn tail only at
    /// the end of the last file, with no valid record after it; anywhere else it is an error.
    private static func readRecords(of path: String, from sequence: inout UInt64, isLast: Bool) throws
        -> (records: [LogFrame.Record], tornTail: TornTail?)
    {
        let bytes = try FileIO.readAll(path)
        var records: [LogFrame.Record] = []
        var offset = 0
        while offset < bytes.count {
            switch LogFrame.record(in: bytes, at: offset) {
            case .success(let record):
                guard record.sequence == sequence else {
                    throw PersistenceError.corruptRecord(
                        path: path, offset: offset,
                        reason: "record number \(record.sequence) where \(sequence) was expected"
                            + (record.sequence > sequence ? " (records are missing)" : ""))
                }
                records.append(record)
                sequence += 1
                offset = record.end
            case .failure(let damage):
                if offset == 0, bytes.count >= 13, bytes[8..<13].elementsEqual(Array("{\"t\":".utf8)) {
                    throw PersistenceError.corruptRecord(
                        path: path, offset: 0,
                        reason: "written by diffcastd 0.1 (a log without record numbers), which this version "
                            + "does not read: keep 0.1 on this directory, or move it aside to start afresh")
                }
                if let later = LogFrame.nextValidHeader(in: bytes, after: offset) {
                    throw PersistenceError.corruptRecord(
                        path: path, offset: offset,
                        reason: "\(damage), followed by a valid record (number \(later.sequence)) at offset "
                            + "\(later.offset): damage inside the log, not a torn tail")
                }
                guard isLast else {
                    throw PersistenceError.corruptRecord(
                        path: path, offset: offset, reason: "\(damage), and newer log files follow this one")
                }
                return (records, TornTail(path: path, offset: offset, damage: damage, bytes: bytes[offset...]))
            }
        }
        return (records, nil)
    }

    /// Applies a checked directory state to an engine; returns the number of records replayed.
    private static func load(_ state: DirectoryState, into engine: ApplyEngine) throws -> Int {
        for entry in state.checkpoint?.collections ?? [] {
            try engine.restore(
                collection: entry.name, epoch: entry.epoch, version: entry.version, sections: entry.sections,
                history: entry.history)
        }
        var count = 0
        for log in state.logs {
            for record in log.records {
                guard let batch = LogRecord.records(inPayload: Array(record.payload)) else {
                    throw PersistenceError.corruptRecord(
                        path: log.path, offset: record.offset, reason: "a record whose checksum holds but is unreadable"
                    )
                }
                do {
                    for decoded in batch { try engine.replay(decoded) }
                } catch {
                    throw PersistenceError.corruptRecord(path: log.path, offset: record.offset, reason: "\(error)")
                }
                count += 1
            }
        }
        return count
    }

    /// Keeps the bytes of a torn tail in a file of their own, then cuts them off the log.
    private func keepAside(_ torn: TornTail) throws {
        try FileIO.replaceAtomically(torn.asidePath, with: Array(torn.bytes), directory: directory)
        guard truncate(torn.path, off_t(torn.offset)) == 0 else {
            throw PersistenceError.system("truncate", path: torn.path, errno: errno)
        }
        logger.warning(
            "cut off a torn write-ahead-log tail (a crash during an append); its bytes are kept aside",
            metadata: [
                "file": "\(torn.path)", "offset": "\(torn.offset)", "bytes": "\(torn.bytes.count)",
                "reason": "\(torn.damage)", "kept_as": "\(torn.asidePath)",
            ])
    }

    private func openLog() throws {
        let descriptor = try FileIO.open(logPath(generation), O_WRONLY | O_CREAT | O_APPEND)
        if logDescriptor >= 0 { close(logDescriptor) }
        logDescriptor = descriptor
        logBytes = Int(lseek(logDescriptor, 0, SEEK_END))
        try FileIO.syncDirectory(directory)
    }

    // MARK: - Logging writes

    /// Appends the records of one apply-queue batch as one log record, and syncs per the policy.
    /// Returns only when they are as durable as the policy promises. When they cannot be
    /// written (no space, quota, I/O error) the log is cut back to where it was and
    /// `StorageUnavailable` is thrown: nothing of the batch is in the log. If even that fails,
    /// another error is thrown and the daemon must stop.
    public func append(_ records: [LogRecord]) throws {
        guard !records.isEmpty else { return }
        var frame: [UInt8] = []
        let sequence = nextSequence + 1
        LogFrame.encode(sequence: nextSequence, payload: LogRecord.payload(of: records), into: &frame)
        let path = logPath(generation)
        do {
            try FileIO.writeAll(logDescriptor, frame, path: path)
            if options.sync == .always { try syncLog(path: path) }
        } catch {
            try cutBack(to: logBytes, path: path)
            throw StorageUnavailable(description: "\(error)")
        }
        logBytes += frame.count
        nextSequence = sequence
        if options.sync != .always {
            hasUnsyncedRecords = true
            if options.sync == .interval { try syncIfDue() }
        }
    }

    private func syncLog(path: String) throws {
        let started = ContinuousClock.now
        try FileIO.sync(logDescriptor, path: path)
        recordSyncDuration?(ContinuousClock.now - started)
        syncs += 1
        lastSync = ContinuousClock.now
        hasUnsyncedRecords = false
    }

    /// Takes a half-written append back off the log, so it never holds a partial record.
    private func cutBack(to offset: Int, path: String) throws {
        guard ftruncate(logDescriptor, off_t(offset)) == 0 else {
            throw PersistenceError.system("truncate back after a failed append", path: path, errno: errno)
        }
        try FileIO.sync(logDescriptor, path: path)
    }

    /// For the `interval` policy: syncs when the interval has passed since the last sync. Under
    /// the other policies it does nothing (`always` has synced already, `never` never does).
    public func syncIfDue() throws {
        guard options.sync == .interval, hasUnsyncedRecords,
            ContinuousClock.now - lastSync >= .milliseconds(options.syncIntervalMilliseconds)
        else { return }
        try syncLog(path: logPath(generation))
    }

    /// Whether the state directory takes writes again: a probe file of one log page's worth is
    /// written, synced and removed.
    public func hasRoom() -> Bool {
        let path = directory + "/.space-probe"
        defer { unlink(path) }
        guard let descriptor = try? FileIO.open(path, O_WRONLY | O_CREAT | O_TRUNC) else { return false }
        defer { close(descriptor) }
        let probe = [UInt8](repeating: 0, count: 64 * 1024)
        return (try? FileIO.writeAll(descriptor, probe, path: path)) != nil
            && (try? FileIO.sync(descriptor, path: path)) != nil
    }

    // MARK: - Checkpoints

    /// Whether the log has grown enough to be folded into a checkpoint.
    public var wantsCheckpoint: Bool { logBytes >= max(options.checkpointLogBytes, checkpointRetryBytes) }

    /// Writes every collection of `engine` to a new checkpoint covering the current log, then
    /// appends to a new log and removes the old one. The new log exists before the checkpoint
    /// names it, so a checkpoint never points past a missing file. On failure (a full disk)
    /// nothing changes but a retry later; the log still holds everything.
    public func checkpoint(_ engine: ApplyEngine) throws {
        let started = ContinuousClock.now
        let next = generation + 1
        let nextDescriptor = try FileIO.open(logPath(next), O_WRONLY | O_CREAT | O_APPEND)
        let bytes = CheckpointFile.encode(
            engine.checkpointEntries(), coveredGeneration: generation, nextSequence: nextSequence)
        do {
            try FileIO.syncDirectory(directory)
            try FileIO.replaceAtomically(checkpointPath, with: bytes, directory: directory)
        } catch {
            close(nextDescriptor)
            unlink(logPath(next))
            unlink(checkpointPath + ".tmp")
            checkpointRetryBytes = logBytes + max(options.checkpointLogBytes / 4, 4096)
            throw error
        }
        let old = generation
        close(logDescriptor)
        logDescriptor = nextDescriptor
        generation = next
        logBytes = 0
        checkpointRetryBytes = 0
        unlink(logPath(old))
        logger.info(
            "checkpoint written",
            metadata: ["bytes": "\(bytes.count)", "covers_log": "\(old)", "took": "\(ContinuousClock.now - started)"])
    }
}

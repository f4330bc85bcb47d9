import DiffcastCore
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

/// Keeps the daemon's state in a directory: a write-ahead log of every published batch (one
/// append and at most one fsync per apply-queue batch: group commit) and, from time to time, a
/// checkpoint of every collection after which the older log is dropped.
///
/// Files: `checkpoint.json` (written atomically; names the log generation it covers) and
/// `wal-<generation>.log` (records: 4-byte length, 4-byte CRC-32, JSON payload, little-endian).
public final class StateStore {
    public struct Options: Sendable, Equatable {
        public var sync: SyncPolicy = .always
        public var syncIntervalMilliseconds = 100
        /// A log larger than this is folded into a new checkpoint.
        public var checkpointLogBytes = 64 * 1024 * 1024

        public init() {}
    }

    let directory: String
    let options: Options
    let logger: Logger
    private var generation: UInt64 = 0
    private var logDescriptor: Int32 = -1
    private var logBytes = 0
    private var lastSync = ContinuousClock.now
    private var hasUnsyncedRecords = false

    private var checkpointPath: String { directory + "/checkpoint.json" }
    private func logPath(_ generation: UInt64) -> String { directory + "/wal-\(generation).log" }

    public init(directory: String, options: Options, logger: Logger) throws {
        self.directory = directory
        self.options = options
        self.logger = logger
        if mkdir(directory, 0o750) != 0 && errno != EEXIST {
            throw PersistenceError.system("mkdir", path: directory, errno: errno)
        }
    }

    deinit {
        if logDescriptor >= 0 { close(logDescriptor) }
    }

    // MARK: - Recovery

    /// Loads the checkpoint and replays the log after it into `engine`; a torn last record is
    /// cut off, a corrupt record before the end stops recovery with its file and offset.
    public func recover(into engine: ApplyEngine) throws {
        let started = ContinuousClock.now
        var covered: UInt64 = 0
        if access(checkpointPath, F_OK) == 0 {
            covered = try loadCheckpoint(into: engine)
        }
        let generations = try FileIO.listDirectory(directory).compactMap { name -> UInt64? in
            guard name.hasPrefix("wal-"), name.hasSuffix(".log") else { return nil }
            return UInt64(name.dropFirst(4).dropLast(4))
        }.sorted()
        var records = 0
        for logGeneration in generations where logGeneration <= covered {
            unlink(logPath(logGeneration))
        }
        for logGeneration in generations where logGeneration > covered {
            records += try replayLog(logGeneration, into: engine)
        }
        generation = max(covered + 1, generations.last ?? 0)
        try openLog()
        logger.info(
            "state recovered",
            metadata: [
                "directory": "\(directory)", "collections": "\(engine.collectionCount)",
                "log_records": "\(records)", "took": "\(ContinuousClock.now - started)",
            ])
    }

    private func loadCheckpoint(into engine: ApplyEngine) throws -> UInt64 {
        let bytes = try FileIO.readAll(checkpointPath)
        let value: JSONValue
        do {
            value = try JSONParser.parse(bytes, maximumDepth: 1024)
        } catch {
            throw PersistenceError.badCheckpoint(path: checkpointPath, reason: error.message)
        }
        guard case .number(let coveredText) = value["wal"], let covered = UInt64(coveredText),
            case .array(let collections) = value["collections"]
        else { throw PersistenceError.badCheckpoint(path: checkpointPath, reason: "missing 'wal' or 'collections'") }
        for entry in collections {
            guard case .string(let name) = entry["name"], case .string(let epoch) = entry["epoch"],
                case .number(let versionText) = entry["version"], let version = UInt64(versionText)
            else {
                throw PersistenceError.badCheckpoint(
                    path: checkpointPath, reason: "a collection without name/epoch/version")
            }
            let sections: [SectionOutline]
            do {
                sections = try CollectionMirror.outline(entry["sections"])
            } catch {
                throw PersistenceError.badCheckpoint(path: checkpointPath, reason: "\(name): \(error)")
            }
            guard case .string(let digest) = entry["digest"], digest == Digest(of: sections).description else {
                throw PersistenceError.badCheckpoint(path: checkpointPath, reason: "\(name): digest mismatch")
            }
            try engine.restore(collection: name, epoch: epoch, version: version, sections: sections)
        }
        return covered
    }

    private func replayLog(_ logGeneration: UInt64, into engine: ApplyEngine) throws -> Int {
        let path = logPath(logGeneration)
        let bytes = try FileIO.readAll(path)
        var offset = 0
        var records = 0
        while offset < bytes.count {
            guard offset + 8 <= bytes.count else {
                try cutTornTail(path, at: offset, reason: "a partial record header")
                break
            }
            let length = Int(littleEndianUInt32(bytes, offset))
            let checksum = littleEndianUInt32(bytes, offset + 4)
            let end = offset + 8 + length
            guard end <= bytes.count else {
                try cutTornTail(path, at: offset, reason: "a record cut short")
                break
            }
            let payload = Array(bytes[(offset + 8)..<end])
            guard CRC32.checksum(payload) == checksum else {
                if end == bytes.count {
                    try cutTornTail(path, at: offset, reason: "a last record with a bad checksum")
                    break
                }
                throw PersistenceError.corruptRecord(path: path, offset: offset, reason: "checksum mismatch")
            }
            guard let record = LogRecord(payload: payload) else {
                throw PersistenceError.corruptRecord(path: path, offset: offset, reason: "unreadable record")
            }
            do {
                try engine.replay(record)
            } catch {
                throw PersistenceError.corruptRecord(path: path, offset: offset, reason: "\(error)")
            }
            records += 1
            offset = end
        }
        return records
    }

    private func cutTornTail(_ path: String, at offset: Int, reason: String) throws {
        logger.warning(
            "cutting off a torn write-ahead-log tail (a crash during a write)",
            metadata: ["file": "\(path)", "offset": "\(offset)", "reason": "\(reason)"])
        guard truncate(path, off_t(offset)) == 0 else {
            throw PersistenceError.system("truncate", path: path, errno: errno)
        }
    }

    private func littleEndianUInt32(_ bytes: [UInt8], _ offset: Int) -> UInt32 {
        UInt32(bytes[offset]) | UInt32(bytes[offset + 1]) << 8 | UInt32(bytes[offset + 2]) << 16
            | UInt32(bytes[offset + 3]) << 24
    }

    private func openLog() throws {
        if logDescriptor >= 0 { close(logDescriptor) }
        let path = logPath(generation)
        logDescriptor = try FileIO.open(path, O_WRONLY | O_CREAT | O_APPEND)
        logBytes = Int(lseek(logDescriptor, 0, SEEK_END))
        try FileIO.syncDirectory(directory)
    }

    // MARK: - Logging writes

    /// Appends the records of one apply-queue batch in one write, and syncs per the policy.
    /// Returns only when they are as durable as the policy promises.
    public func append(_ records: [LogRecord]) throws {
        guard !records.isEmpty else { return }
        var frame: [UInt8] = []
        for record in records {
            let payload = record.payload
            var header = UInt32(payload.count).littleEndian
            withUnsafeBytes(of: &header) { frame.append(contentsOf: $0) }
            var checksum = CRC32.checksum(payload).littleEndian
            withUnsafeBytes(of: &checksum) { frame.append(contentsOf: $0) }
            frame.append(contentsOf: payload)
        }
        let path = logPath(generation)
        try FileIO.writeAll(logDescriptor, frame, path: path)
        logBytes += frame.count
        hasUnsyncedRecords = true
        switch options.sync {
        case .always:
            try syncLog()
        case .interval:
            try syncIfDue()
        case .never:
            break
        }
    }

    /// For the `interval` policy: syncs when the interval has passed since the last sync.
    public func syncIfDue() throws {
        guard hasUnsyncedRecords,
            ContinuousClock.now - lastSync >= .milliseconds(options.syncIntervalMilliseconds)
        else { return }
        try syncLog()
    }

    private func syncLog() throws {
        try FileIO.sync(logDescriptor, path: logPath(generation))
        lastSync = ContinuousClock.now
        hasUnsyncedRecords = false
    }

    // MARK: - Checkpoints

    /// Whether the log has grown enough to be folded into a checkpoint.
    public var wantsCheckpoint: Bool { logBytes >= options.checkpointLogBytes }

    /// Writes every collection of `engine` to a new checkpoint covering the current log, then
    /// starts a new log and removes the old one.
    public func checkpoint(_ engine: ApplyEngine) throws {
        let started = ContinuousClock.now
        var output = JSONOutput(reservingCapacity: 1 << 16)
        output.appendRaw("{\"wal\":")
        output.append(generation)
        output.appendRaw(",\"collections\":[")
        for (index, entry) in engine.checkpointEntries().enumerated() {
            output.appendRaw(index == 0 ? "{\"name\":" : ",{\"name\":")
            output.append(string: entry.name)
            WireEncoder.appendState(of: entry.snapshot, version: entry.version, epoch: entry.epoch, into: &output)
            output.appendByte(UInt8(ascii: "}"))
        }
        output.appendRaw("]}\n")
        try FileIO.replaceAtomically(checkpointPath, with: output.bytes, directory: directory)
        let old = generation
        generation += 1
        try openLog()
        unlink(logPath(old))
        logger.info(
            "checkpoint written",
            metadata: [
                "bytes": "\(output.bytes.count)", "covers_log": "\(old)", "took": "\(ContinuousClock.now - started)",
            ])
    }
}

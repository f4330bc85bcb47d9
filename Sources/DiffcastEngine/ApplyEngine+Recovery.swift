import DiffcastCore
import DiffcastWire

/// Rebuilding the collections from a checkpoint and a write-ahead log, and listing them for the
/// next checkpoint.
extension ApplyEngine {
    // MARK: - Recovery

    /// A collection as a checkpoint kept it.
    public func restore(collection name: String, epoch: String, version: UInt64, sections: [SectionOutline]) throws {
        try restore(collection: name, epoch: epoch, version: version, sections: sections, history: [])
    }

    /// Restores a collection with its earlier versions (oldest first), for catch-ups.
    package func restore(
        collection name: String, epoch: String, version: UInt64, sections: [SectionOutline],
        history: VersionHistory
    ) throws {
        let state = CollectionState(name: name, epoch: epoch)
        state.document = try Document(restoring: sections)
        state.exists = true
        state.restore(earlier: history, current: version, within: historyLimits)
        collections[name] = state
    }

    /// Redoes one logged record, as it was done before the restart.
    public func replay(_ record: LogRecord) throws {
        switch record {
        case .create(let name, let epoch):
            let state = CollectionState(name: name, epoch: epoch)
            state.exists = true
            collections[name] = state
        case .drop(let name):
            collections[name] = nil
        case .batch(let name, let version, let writes):
            guard let state = collections[name] else {
                throw RecoveryError.inconsistent("a batch for '\(name)', which does not exist")
            }
            // A logged batch follows the version before it; the history (and a checkpoint made
            // from it) must never hold a version twice (found by the wal_file fuzz target).
            guard state.isFollowed(byBatchAt: version) else {
                throw RecoveryError.inconsistent(
                    "a batch for '\(name)' at version \(version), which does not follow \(state.version)")
            }
            let previous = state.document.snapshot
            for line in writes { try redo(line, on: state) }
            _ = state.document.takeMarks()
            state.advance(to: version, leaving: previous, within: historyLimits)
        }
    }

    /// Applies one logged write line again, as it was applied when it was logged.
    func redo(_ line: [UInt8], on state: CollectionState) throws {
        guard case .write(_, let operation) = try lineParser.parse(line: line).command else {
            throw RecoveryError.inconsistent("a logged line of '\(state.name)' is not a write")
        }
        try state.document.apply(operation)
    }

    /// Every existing collection's state, for a checkpoint.
    public func checkpointEntries() -> [(
        name: String, epoch: String, version: UInt64, snapshot: Snapshot, history: VersionHistory
    )] {
        collections.filter(\.exists).sorted { $0.name < $1.name }.map { state in
            (state.name, state.epoch, state.version, state.document.snapshot, state.history)
        }
    }

    public var collectionCount: Int { collections.count { $0.exists } }

    /// Whether a collection exists (a subscription to one that does not creates it).
    public func holds(_ name: String) -> Bool { existing(name) != nil }

    /// A collection's epoch and version, when it exists.
    public func position(of name: String) -> (epoch: String, version: UInt64)? {
        existing(name).map { ($0.epoch, $0.version) }
    }
}

import DiffcastCore
import DiffcastWire

/// Applying what other daemons appended to the shared log (`--backbone`), and taking a
/// collection from a snapshot of it.
extension ApplyEngine {
    // MARK: - Following a shared log

    /// Whether a shared-log message can be applied to what this daemon holds: a batch must
    /// follow the collection's current version (so a batch at version 0 never does).
    public func followsHeldVersion(_ records: [LogRecord]) -> Bool {
        guard case .batch(let name, let version, _) = records.first else { return true }
        return existing(name)?.isFollowed(byBatchAt: version) == true
    }

    /// Takes a collection's state from a snapshot of the shared log (the messages before it
    /// were cut from the log). Subscribers get one changeset to it; under another epoch the
    /// collection is dropped and made anew.
    public func adopt(_ snapshot: SharedLogSnapshot) throws -> [Outcome] {
        _ = commitLastBatch()
        defer { outcomes = [] }
        let name = snapshot.name
        guard let state = existing(name), state.epoch == snapshot.epoch else {
            if existing(name) != nil { outcomes.append(.dropped(collection: name)) }
            try restore(
                collection: name, epoch: snapshot.epoch, version: snapshot.version, sections: snapshot.sections)
            return outcomes
        }
        guard snapshot.version > state.version else { return [] }
        let document = try Document(restoring: snapshot.sections)
        let changeset = Differ.changeset(from: state.document.snapshot, to: document.snapshot)
        let from = state.version
        let previous = state.document.snapshot
        state.document = document
        state.advance(to: snapshot.version, leaving: previous, within: historyLimits)
        let event = Event.changeset(
            collection: name, epoch: state.epoch, from: from, version: state.version, changeset,
            digest: Digest(of: document.snapshot))
        outcomes.append(
            .published(
                collection: name, from: from, to: state.version, event: Encoded(event),
                windows: advanceWindows(of: state, from: previous, changeset: changeset)))
        return outcomes
    }

    /// A collection's state as a shared-log snapshot taken at `logSequence`.
    public func snapshotForSharedLog(of name: String, logSequence: UInt64) -> [UInt8]? {
        guard let state = existing(name) else { return nil }
        return SharedLogSnapshot.encode(
            name: name, epoch: state.epoch, version: state.version, logSequence: logSequence,
            snapshot: state.document.snapshot)
    }

    /// Applies records that another daemon appended to the shared log, as that daemon applied
    /// them: the same versions, epochs, digests and events for this daemon's subscribers.
    /// Records that do not fit (a batch for a version this daemon does not hold) are skipped
    /// and logged; they cannot come from a log that is appended only after its expected last
    /// message.
    public func follow(_ records: [LogRecord]) -> [Outcome] {
        _ = commitLastBatch()
        for record in records {
            switch record {
            case .create(let name, let epoch):
                if let state = collections[name], state.exists {
                    guard state.epoch != epoch else { continue }
                    outcomes.append(.dropped(collection: name))
                }
                let state = CollectionState(name: name, epoch: epoch)
                state.exists = true
                collections[name] = state
            case .drop(let name):
                guard collections.removeValue(forKey: name) != nil else { continue }
                droppedCollections = true
                outcomes.append(.dropped(collection: name))
            case .batch(let name, let version, let writes):
                guard let state = existing(name), state.isFollowed(byBatchAt: version) else {
                    logger?.error(
                        "shared log: a batch that does not fit",
                        metadata: ["collection": "\(name)", "version": "\(version)"])
                    continue
                }
                open(state)
                for line in writes {
                    do {
                        try redo(line, on: state)
                    } catch {
                        logger?.error("shared log: a write that does not apply", metadata: ["collection": "\(name)"])
                    }
                }
                publishOpenBatch(of: name)
            }
        }
        logRecords = []
        defer { outcomes = [] }
        return outcomes
    }

    /// The counters so far (for metrics).
    public var currentStatistics: ApplyStatistics { statistics }
}

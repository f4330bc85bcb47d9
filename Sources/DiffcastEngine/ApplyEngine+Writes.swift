import DiffcastCore
import DiffcastWire

/// Writes: applied to a collection's open batch, which becomes one version when it is published.
extension ApplyEngine {
    // MARK: - Writes

    func write(_ operation: WriteOperation, to name: String, _ request: Request, _ address: ResponseAddress) {
        let found = collections[name]
        if found == nil && isAtCollectionLimit {
            statistics.writesRejected += 1
            return fail(request, address, .limitExceeded("max_collections (\(limits.collections)) collections exist"))
        }
        rememberBeforeChange(name)
        let state = found ?? state(for: name)
        let most = operation.mostItemsAfter(current: state.document.itemCount)
        if most > limits.itemsPerCollection {
            statistics.writesRejected += 1
            if !state.exists && state.openBatchSlot < 0 { collections[name] = nil }
            return fail(
                request, address,
                .limitExceeded("max_items_per_collection (\(limits.itemsPerCollection)): this write could make \(most)")
            )
        }
        let opensBatch = state.openBatchSlot < 0
        if opensBatch { open(state) }
        let slot = Int(state.openBatchSlot)
        do {
            try state.document.apply(operation)
        } catch {
            statistics.writesRejected += 1
            if opensBatch {
                closeBatch(at: slot)
                if !state.exists { collections[name] = nil }
            }
            return fail(request, address, state.exists ? error : .inMissingCollection(name, error))
        }
        statistics.writesApplied += 1
        materialize(state)
        // Appended in place: copying the batch out and back would make a burst quadratic.
        openBatches[slot].acknowledgements.append(
            OpenBatch.Acknowledgement(address: address, request: request))
    }

    /// The writes to `state` waiting to be published, if any.
    func openBatch(of state: CollectionState) -> OpenBatch? {
        state.openBatchSlot < 0 ? nil : openBatches[Int(state.openBatchSlot)]
    }

    /// The snapshot of `state` at `version`, when it is kept: with a batch open, the version
    /// published last is the batch's base, not the document.
    func snapshot(of state: CollectionState, at version: UInt64) -> Snapshot? {
        if version == state.version, let batch = openBatch(of: state) { return batch.base }
        return state.snapshot(at: version)
    }

    /// Starts collecting the writes to `state` into one version.
    func open(_ state: CollectionState) {
        state.openBatchSlot = Int32(openBatches.count)
        openBatches.append(OpenBatch(of: state, expectedWrites: writesInLastBatch))
    }

    /// Forgets the batch at `slot` (its writes are published or refused): the last batch takes
    /// its place.
    private func closeBatch(at slot: Int) {
        openBatches[slot].state.openBatchSlot = -1
        let last = openBatches.removeLast()
        guard slot < openBatches.count else { return }
        openBatches[slot] = last
        last.state.openBatchSlot = Int32(slot)
    }

    /// Publishes every open batch, in the order of the collections' names.
    func publishAllOpenBatches() {
        guard !openBatches.isEmpty else { return }
        for name in openBatches.map(\.state.name).sorted() {
            publishOpenBatch(of: name)
        }
    }

    /// Diffs the open batch of a collection once, publishes it as the next version when
    /// anything changed, then acknowledges every write in it with that version.
    func publishOpenBatch(of name: String) {
        guard let state = collections[name], let batch = openBatch(of: state) else { return }
        closeBatch(at: Int(state.openBatchSlot))
        writesInLastBatch = batch.acknowledgements.count
        let changeset = state.document.changeset(since: batch.base)
        if !changeset.isEmpty {
            let from = state.version
            state.advance(to: from + 1, leaving: batch.base, within: historyLimits)
            statistics.versionsPublished += 1
            let event = Event.changeset(
                collection: name, epoch: state.epoch, from: from, version: state.version, changeset,
                digest: Digest(of: state.document.snapshot))
            journal(.batch(collection: name, version: state.version, writes: batch.acknowledgements.map(\.line)))
            outcomes.append(
                .published(
                    collection: name, from: from, to: state.version, event: Encoded(event),
                    windows: advanceWindows(of: state, from: batch.base, changeset: changeset)))
        }
        acknowledge(batch.acknowledgements, at: VersionMark(collection: name, version: state.version))
    }

    /// Answers the writes of a batch. They share their version, so writes without an `id` and
    /// with the same op (a feed's) get the same bytes, encoded once; and such writes that a
    /// connection sent one after the other are answered as one run, one outcome for all.
    private func acknowledge(_ writes: [OpenBatch.Acknowledgement], at mark: VersionMark) {
        var lastShared: (op: String, response: Encoded<Response>)?
        var run: (first: ResponseAddress, writes: Int, response: Encoded<Response>, extends: Bool)?
        for write in writes {
            if write.id == nil, let current = run, current.extends, current.response.value.op == write.op,
                write.address.connection == current.first.connection,
                write.address.slot == current.first.slot &+ UInt64(current.writes)
            {
                run?.writes += 1
                continue
            }
            if let run { outcomes.append(.acknowledged(run.first, run.response, mark, writes: run.writes)) }
            let response: Encoded<Response>
            if write.id == nil, let shared = lastShared, shared.op == write.op {
                response = shared.response
            } else {
                response = Encoded(Response.success(id: write.id, op: write.op, .version(mark.version)))
                if write.id == nil { lastShared = (write.op, response) }
            }
            run = (write.address, 1, response, write.id == nil)
        }
        if let run { outcomes.append(.acknowledged(run.first, run.response, mark, writes: run.writes)) }
    }
}

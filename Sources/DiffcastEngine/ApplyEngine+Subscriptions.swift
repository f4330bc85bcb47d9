import DiffcastCore
import DiffcastWire

/// Subscriptions, whole and windowed: where each starts, the catch-up of one that fell behind, and
/// the window events of each version.
extension ApplyEngine {
    // MARK: - Subscriptions

    func subscribe(
        _ name: String, since: UInt64?, epoch: String?, _ request: Request, _ address: ResponseAddress
    ) {
        rememberBeforeChange(name)
        let state = state(for: name)
        materialize(state)
        state.windows.leave(address.connection)
        let event = catchUpEvent(state, since: epoch == nil || epoch == state.epoch ? since : nil)
        outcomes.append(
            .subscribed(
                address, collection: name, version: state.version, event: event.map(Encoded.init),
                response: subscribedResponse(to: request, of: state)))
    }

    func catchUp(connection: ConnectionID, name: String, since: UInt64, window range: WindowRange?) {
        guard let state = existing(name) else { return }
        guard let range else {
            outcomes.append(
                .caughtUp(
                    connection: connection, collection: name, version: state.version,
                    event: catchUpEvent(state, since: since).map(Encoded.init)))
            return
        }
        // A windowed subscriber holds the view of `range` at `since`: one changeset from it to its
        // window's view now (none when they are the same), or the view when `since` is forgotten.
        guard let group = state.windows.group(of: connection), let tracker = state.windows.tracker(group) else {
            return
        }
        var event: Event?
        if let old = snapshot(of: state, at: since)?.view(range) {
            let changeset = WindowTracker.changeset(from: old, to: tracker.view)
            if !changeset.isEmpty {
                event = .changeset(
                    collection: name, epoch: state.epoch, from: since, version: state.version, changeset,
                    digest: Digest(of: tracker.view), window: tracker.place)
            }
        } else {
            event = .snapshot(
                collection: name, epoch: state.epoch, version: state.version, tracker.view, window: tracker.place)
        }
        outcomes.append(
            .caughtUp(
                connection: connection, collection: name, version: state.version, event: event.map(Encoded.init),
                window: tracker.range))
    }

    /// Nothing when `since` is current, one changeset from `since` when its snapshot is still
    /// kept, else the whole state as a snapshot event.
    func catchUpEvent(_ state: CollectionState, since: UInt64?) -> Event? {
        let current = state.document.snapshot
        if let since, since == state.version { return nil }
        if let since, since < state.version, let old = snapshot(of: state, at: since) {
            return .changeset(
                collection: state.name, epoch: state.epoch, from: since, version: state.version,
                Differ.changeset(from: old, to: current), digest: Digest(of: current))
        }
        return .snapshot(collection: state.name, epoch: state.epoch, version: state.version, current)
    }

    // MARK: - Windows

    /// Subscribes with a window (SPEC.md "Windows"): the subscriber joins the group showing that
    /// window and is sent its view. An anchor that is not in the collection is refused, and
    /// then nothing changes: no collection is made, the connection's subscription goes on.
    func subscribe(_ name: String, window: Window, _ request: Request, _ address: ResponseAddress) {
        let tracker: WindowTracker
        do {
            tracker = try WindowTracker(window, over: existing(name)?.document ?? Document())
        } catch {
            return fail(request, address, existing(name) == nil ? .inMissingCollection(name, error) : error)
        }
        rememberBeforeChange(name)
        let state = state(for: name)
        materialize(state)
        var join: WindowJoin?
        var shown = tracker
        if address.connection != SharedLogApplier.forwardedConnection {
            // A subscribe another daemon forwarded only makes the collection; its subscriber is there.
            let (group, groupTracker) = state.windows.join(address.connection, tracker, nextID: nextWindowGroup)
            join = WindowJoin(group: group, range: groupTracker.range)
            shown = groupTracker
        }
        let event = Event.snapshot(
            collection: name, epoch: state.epoch, version: state.version, shown.view, window: shown.place)
        outcomes.append(
            .subscribed(
                address, collection: name, version: state.version, event: Encoded(event),
                response: subscribedResponse(to: request, of: state), window: join))
    }

    /// The `window` op: moves the connection's windowed subscription to another window, with one
    /// changeset from its old view to the new one (a subscriber that is behind gets a catch-up
    /// instead, from the loop).
    func rewindow(_ name: String, _ window: Window, _ request: Request, _ address: ResponseAddress) {
        guard let state = existing(name), let group = state.windows.group(of: address.connection),
            let old = state.windows.tracker(group)
        else {
            return fail(
                request, address,
                .invalidArgument(
                    "this connection has no windowed subscription to '\(name)': subscribe with a window first"))
        }
        let tracker: WindowTracker
        do {
            tracker = try WindowTracker(window, over: state.document)
        } catch {
            return fail(request, address, error)
        }
        let (newGroup, shown) = state.windows.join(address.connection, tracker, nextID: nextWindowGroup)
        let changeset = WindowTracker.changeset(from: old.view, to: shown.view)
        let event =
            changeset.isEmpty
            ? nil
            : WindowEvent(
                collection: name, epoch: state.epoch, version: state.version, changeset, place: shown.place,
                digest: Digest(of: shown.view))
        outcomes.append(
            .rewindowed(
                address, collection: name, version: state.version,
                window: WindowJoin(group: newGroup, range: shown.range),
                event: event, response: Encoded(.success(id: request.id, op: request.op, .version(state.version)))))
    }

    /// `get` with a window: the view at the current version, with its place and digest.
    func getView(of state: CollectionState, _ window: Window, _ request: Request, _ address: ResponseAddress) {
        let tracker: WindowTracker
        do {
            tracker = try WindowTracker(window, over: state.document)
        } catch {
            return fail(request, address, error)
        }
        answer(
            request, address,
            .state(
                collection: state.name, epoch: state.epoch, version: state.version, tracker.view,
                window: tracker.place))
    }

    /// Moves a collection's windows on to the version just published (whose previous state was
    /// `previous`); the events of the windows whose view changed.
    func advanceWindows(
        of state: CollectionState, from previous: Snapshot, changeset: Changeset
    ) -> [WindowDelivery] {
        guard !state.windows.isEmpty else { return [] }
        let changed = state.windows.advance(
            from: previous, to: state.document, marks: WindowMarks(of: changeset, in: state.document.snapshot))
        return changed.map { group, tracker, windowChangeset in
            WindowDelivery(
                group: group,
                event: WindowEvent(
                    collection: state.name, epoch: state.epoch, version: state.version, windowChangeset,
                    place: tracker.place, digest: Digest(of: tracker.view)),
                range: tracker.range)
        }
    }

    func nextWindowGroup() -> WindowGroupID {
        lastWindowGroup += 1
        return lastWindowGroup
    }

    func subscribedResponse(to request: Request, of state: CollectionState) -> Encoded<Response> {
        Encoded(
            .success(
                id: request.id, op: request.op,
                .subscribed(collection: state.name, epoch: state.epoch, version: state.version)))
    }
}

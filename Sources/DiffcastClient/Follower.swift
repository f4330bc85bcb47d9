import DiffcastCore
import DiffcastWire

/// Keeps a verified copy of collections for as long as it is iterated: subscribes, applies every
/// event to a `CollectionMirror` (digest checked on every version), subscribes again without
/// `since` when a mirror diverges, and reconnects with `since`/`epoch` when the connection ends —
/// so the daemon sends one changeset (or a snapshot) and the chain goes on. A dropped collection
/// is subscribed to again, which (as every `subscribe`) makes it anew, empty, under a new epoch:
/// the follower goes on with that epoch's snapshot and changesets. With a `window`, each mirror
/// holds only that window's view (SPEC.md "Windows"), and every (re)subscription starts with a
/// snapshot of it: a window never resumes from a version.
///
/// ```swift
/// for try await update in Follower(endpoint: .unix(path: "/run/diffcast/diffcast.sock"), collections: ["feed"]).updates() {
///     if case .changed(let changeset) = update.change { table.performBatchUpdates(changeset) }
/// }
/// ```
public struct Follower: Sendable {
    /// One step of a followed collection, with the mirror as it stands after it.
    public struct Update: Sendable {
        public enum Change: Sendable {
            /// The whole state arrived (first, or after a divergence or a gap the daemon could
            /// not bridge): reload everything from `mirror`.
            case snapshot(raw: JSONValue)
            /// One changeset, applied and verified.
            case changed(Changeset, raw: JSONValue)
            /// The collection was dropped; the follower has subscribed to it again.
            case dropped
            /// An event did not fit (its reason); the follower has subscribed again without
            /// `since` and ignores the collection's events until the snapshot comes.
            case diverged(String)
            /// The connection ended (its reason); the follower reconnects and resumes.
            case disconnected(String)
            /// Subscribed (again) at this version: after a connect, a divergence or a drop.
            /// Version 0 means nothing has been written to the collection yet.
            case subscribed(version: UInt64)
        }

        /// The collection, or nil for what concerns the connection (`disconnected`).
        public let collection: String?
        public let change: Change
        public let mirror: CollectionMirror
    }

    public let endpoint: Endpoint
    public let token: String?
    public let collections: [String]
    /// Mirrors to resume collections from (e.g. what `diffcast sub --state FILE` kept): the
    /// follower subscribes with their version and epoch, and the daemon sends one changeset from
    /// there (nothing when it is current), or a snapshot when its history does not reach back.
    public let resume: [String: CollectionMirror]
    /// The longest wait between two reconnection attempts.
    public let maximumBackoff: Duration
    /// The window every collection is followed through, or nil for whole collections.
    public let window: Window?

    public init(
        endpoint: Endpoint, token: String? = nil, collections: [String],
        resume: [String: CollectionMirror] = [:], maximumBackoff: Duration = .seconds(2), window: Window? = nil
    ) {
        self.endpoint = endpoint
        self.token = token
        self.collections = collections
        self.resume = window == nil ? resume : [:]
        self.maximumBackoff = maximumBackoff
        self.window = window
    }

    /// The updates of every followed collection, in the order they happened. Ends with an error
    /// only when the daemon refuses a subscription (a bad name, a wrong token); ends quietly when
    /// the consuming task is cancelled.
    public func updates() -> AsyncThrowingStream<Update, any Error> {
        let (stream, sink) = AsyncThrowingStream<Update, any Error>.makeStream()
        let task = Task { [self] in
            do {
                try await follow(sink)
                sink.finish()
            } catch {
                sink.finish(throwing: error)
            }
        }
        sink.onTermination = { _ in task.cancel() }
        return stream
    }

    private func follow(_ sink: AsyncThrowingStream<Update, any Error>.Continuation) async throws {
        var mirrors = resume.filter { collections.contains($0.key) }
        var backoff = Duration.milliseconds(50)
        while !Task.isCancelled {
            let reason = try await followOnce(&mirrors, sink) { backoff = .milliseconds(50) }
            if Task.isCancelled { break }
            sink.yield(Update(collection: nil, change: .disconnected(reason), mirror: .init()))
            try await Task.sleep(for: backoff)
            backoff = min(backoff * 2, maximumBackoff)
        }
    }

    /// `subscribe` for a collection: with the window, else from the mirror's version and epoch
    /// when it holds one.
    private func subscribeRequest(_ name: String, from mirror: CollectionMirror?) -> JSONValue {
        if let window {
            return ["op": "subscribe", "collection": .string(name), "window": window.jsonValue]
        }
        guard let version = mirror?.version, let epoch = mirror?.epoch else {
            return ["op": "subscribe", "collection": .string(name)]
        }
        return [
            "op": "subscribe", "collection": .string(name), "since": .number(String(version)),
            "epoch": .string(epoch),
        ]
    }

    /// One connection: subscribes (from the mirrors held, which are carried from one connection
    /// to the next), applies events until the connection ends, and returns why it ended. Throws
    /// when the daemon refuses a subscription.
    private func followOnce(
        _ mirrors: inout [String: CollectionMirror], _ sink: AsyncThrowingStream<Update, any Error>.Continuation,
        subscribed: () -> Void
    ) async throws -> String {
        let connection: DaemonConnection
        switch await connectOnce() {
        case .success(let connected): connection = connected
        case .failure(let error):
            guard case .cannotConnect = error else { throw error }
            return error.description
        }
        defer { connection.close() }
        let requests = collections.map { subscribeRequest($0, from: mirrors[$0]) }
        let responses: [JSONValue]
        switch await pipelineOnce(connection, requests) {
        case .success(let answered): responses = answered
        case .failure(let error):
            if case .response = error { throw error }
            return error.description
        }
        for (name, response) in zip(collections, responses) {
            Self.yieldSubscribed(name, response, mirror: mirrors[name] ?? .init(), sink)
        }
        subscribed()
        var resynchronizing: Set<String> = []
        for await event in connection.events {
            guard case .string(let name) = event["collection"], collections.contains(name) else { continue }
            if resynchronizing.contains(name) && event["event"] != .string("snapshot") { continue }
            resynchronizing.remove(name)
            var mirror = mirrors[name] ?? CollectionMirror()
            let change: Update.Change
            do {
                switch try mirror.feed(event) {
                case .snapshot: change = .snapshot(raw: event)
                case .changeset(let changeset): change = .changed(changeset, raw: event)
                case .dropped: change = .dropped
                }
            } catch {
                change = .diverged(error.description)
            }
            sink.yield(Update(collection: name, change: change, mirror: mirror))
            guard change.subscribesAgain else {
                mirrors[name] = mirror
                continue
            }
            // Until the snapshot comes, a lost connection subscribes without `since` too.
            mirrors[name] = nil
            resynchronizing.insert(name)
            switch await pipelineOnce(connection, [subscribeRequest(name, from: nil)]) {
            case .success(let answered): Self.yieldSubscribed(name, answered[0], mirror: .init(), sink)
            // A refusal ends the follower; a lost connection ends `events`, then we reconnect.
            case .failure(let error): if case .response = error { throw error }
            }
        }
        return "the connection ended"
    }

    /// Reports a `subscribe` response's version.
    private static func yieldSubscribed(
        _ name: String, _ response: JSONValue, mirror: CollectionMirror,
        _ sink: AsyncThrowingStream<Update, any Error>.Continuation
    ) {
        guard case .number(let text) = response["version"], let version = UInt64(text) else { return }
        sink.yield(Update(collection: name, change: .subscribed(version: version), mirror: mirror))
    }

    private func connectOnce() async -> Result<DaemonConnection, ClientError> {
        do {
            return .success(try await DaemonConnection.connect(to: endpoint, token: token))
        } catch {
            return .failure(error)
        }
    }

    /// The requests' responses, an error response counted as a failure.
    private func pipelineOnce(_ connection: DaemonConnection, _ requests: [JSONValue]) async -> Result<
        [JSONValue], ClientError
    > {
        do {
            let responses = try await connection.pipeline(requests)
            for response in responses { try DaemonConnection.check(response) }
            return .success(responses)
        } catch {
            return .failure(error)
        }
    }
}

extension Follower.Update.Change {
    /// Whether the follower subscribes again without `since` after this change: after a drop
    /// there is nothing to resume from, after a divergence the events are not trusted.
    fileprivate var subscribesAgain: Bool {
        switch self {
        case .dropped, .diverged: true
        case .snapshot, .changed, .disconnected, .subscribed: false
        }
    }
}

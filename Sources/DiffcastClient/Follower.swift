import DiffcastCore
import DiffcastWire

/// Keeps a verified copy of collections for as long as it is iterated: subscribes, applies every
/// event to a `CollectionMirror` (digest checked on every version), subscribes again without
/// `since` when a mirror diverges, and reconnects with `since`/`epoch` when the connection ends —
/// so the daemon sends one changeset (or a snapshot) and the chain goes on.
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
            /// The collection was dropped.
            case dropped
            /// An event did not fit (its reason); the follower has subscribed again without
            /// `since` and ignores the collection's events until the snapshot comes.
            case diverged(String)
            /// The connection ended (its reason); the follower reconnects and resumes.
            case disconnected(String)
            /// Subscribed (again) at this version after a connect.
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
    /// A version of a collection's epoch to resume from.
    public struct Position: Sendable, Equatable {
        public var version: UInt64
        public var epoch: String

        public init(version: UInt64, epoch: String) {
            self.version = version
            self.epoch = epoch
        }
    }

    /// Where to resume collections from (e.g. `diffcast sub --since V --epoch E`): the daemon
    /// sends one changeset from there, or a snapshot when it cannot.
    public let resume: [String: Position]
    /// The longest wait between two reconnection attempts.
    public let maximumBackoff: Duration

    public init(
        endpoint: Endpoint, token: String? = nil, collections: [String],
        resume: [String: Position] = [:], maximumBackoff: Duration = .seconds(2)
    ) {
        self.endpoint = endpoint
        self.token = token
        self.collections = collections
        self.resume = resume
        self.maximumBackoff = maximumBackoff
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
        var session = Session(positions: resume)
        var backoff = Duration.milliseconds(50)
        while !Task.isCancelled {
            let reason = try await followOnce(&session, sink) { backoff = .milliseconds(50) }
            if Task.isCancelled { break }
            sink.yield(Update(collection: nil, change: .disconnected(reason), mirror: .init()))
            try await Task.sleep(for: backoff)
            backoff = min(backoff * 2, maximumBackoff)
        }
    }

    /// What a follower carries from one connection to the next.
    private struct Session {
        var mirrors: [String: CollectionMirror] = [:]
        var positions: [String: Position]
    }

    /// One connection: subscribes (from the positions held), applies events until the
    /// connection ends, and returns why it ended. Throws when the daemon refuses a subscription.
    private func followOnce(
        _ session: inout Session, _ sink: AsyncThrowingStream<Update, any Error>.Continuation,
        subscribed: () -> Void
    ) async throws -> String {
        let connection: Connection
        switch await connectOnce() {
        case .success(let connected): connection = connected
        case .failure(let error):
            guard case .cannotConnect = error else { throw error }
            return error.description
        }
        defer { connection.close() }
        let requests: [JSONValue] = collections.map { name in
            guard let position = session.positions[name] else {
                return ["op": "subscribe", "collection": .string(name)]
            }
            return [
                "op": "subscribe", "collection": .string(name), "since": .number(String(position.version)),
                "epoch": .string(position.epoch),
            ]
        }
        let responses: [JSONValue]
        switch await pipelineOnce(connection, requests) {
        case .success(let answered): responses = answered
        case .failure(let error):
            if case .response = error { throw error }
            return error.description
        }
        for (name, response) in zip(collections, responses) {
            if case .number(let text) = response["version"], let version = UInt64(text) {
                sink.yield(
                    Update(
                        collection: name, change: .subscribed(version: version),
                        mirror: session.mirrors[name] ?? .init()))
            }
        }
        subscribed()
        var resynchronizing: Set<String> = []
        for await event in connection.events {
            guard case .string(let name) = event["collection"], collections.contains(name) else { continue }
            if resynchronizing.contains(name) && event["event"] != .string("snapshot") { continue }
            resynchronizing.remove(name)
            var mirror = session.mirrors[name] ?? CollectionMirror()
            do {
                let change: Update.Change
                switch try mirror.feed(event) {
                case .snapshot: change = .snapshot(raw: event)
                case .changeset(let changeset): change = .changed(changeset, raw: event)
                case .dropped: change = .dropped
                }
                session.mirrors[name] = mirror
                session.positions[name] = mirror.version.flatMap { version in
                    mirror.epoch.map { Position(version: version, epoch: $0) }
                }
                sink.yield(Update(collection: name, change: change, mirror: mirror))
            } catch {
                sink.yield(Update(collection: name, change: .diverged(error.description), mirror: mirror))
                session.positions[name] = nil
                resynchronizing.insert(name)
                // A refusal ends the follower; a lost connection ends `events`, then we reconnect.
                if case .failure(let error) = await pipelineOnce(
                    connection, [["op": "subscribe", "collection": .string(name)]]),
                    case .response = error
                {
                    throw error
                }
            }
        }
        return "the connection ended"
    }

    private func connectOnce() async -> Result<Connection, ClientError> {
        do {
            return .success(try await Connection.connect(to: endpoint, token: token))
        } catch {
            return .failure(error)
        }
    }

    /// The requests' responses, an error response counted as a failure.
    private func pipelineOnce(_ connection: Connection, _ requests: [JSONValue]) async -> Result<
        [JSONValue], ClientError
    > {
        do {
            let responses = try await connection.pipeline(requests)
            for response in responses { try Connection.check(response) }
            return .success(responses)
        } catch {
            return .failure(error)
        }
    }
}

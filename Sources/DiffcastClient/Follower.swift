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

    private func connectOnce() async -> Result<Connection, ClientError> {
        do {
            return .success(try await Connection.connect(to: endpoint, token: token))
        } catch {
            return .failure(error)
        }
    }

    private func follow(_ sink: AsyncThrowingStream<Update, any Error>.Continuation) async throws {
        var mirrors: [String: CollectionMirror] = [:]
        var positions = resume
        var backoff = Duration.milliseconds(50)
        while !Task.isCancelled {
            let connection: Connection
            switch await connectOnce() {
            case .success(let connected):
                connection = connected
            case .failure(let error):
                guard case .cannotConnect = error else { throw error }
                sink.yield(Update(collection: nil, change: .disconnected(error.description), mirror: .init()))
                try await Task.sleep(for: backoff)
                backoff = min(backoff * 2, maximumBackoff)
                continue
            }
            defer { connection.close() }
            let requests: [JSONValue] = collections.map { name in
                guard let position = positions[name] else { return ["op": "subscribe", "collection": .string(name)] }
                return [
                    "op": "subscribe", "collection": .string(name), "since": .number(String(position.version)),
                    "epoch": .string(position.epoch),
                ]
            }
            let responses: [JSONValue]
            do {
                responses = try await connection.pipeline(requests)
            } catch {
                sink.yield(Update(collection: nil, change: .disconnected(error.description), mirror: .init()))
                continue
            }
            for (name, response) in zip(collections, responses) {
                try Connection.check(response)
                if case .number(let text) = response["version"], let version = UInt64(text) {
                    sink.yield(
                        Update(
                            collection: name, change: .subscribed(version: version), mirror: mirrors[name] ?? .init()))
                }
            }
            backoff = .milliseconds(50)
            var resynchronizing: Set<String> = []
            for await event in connection.events {
                guard case .string(let name) = event["collection"], collections.contains(name) else { continue }
                let isSnapshot = event["event"] == .string("snapshot")
                if resynchronizing.contains(name) && !isSnapshot { continue }
                resynchronizing.remove(name)
                var mirror = mirrors[name] ?? CollectionMirror()
                do {
                    let applied = try mirror.feed(event)
                    let change: Update.Change
                    switch applied {
                    case .snapshot: change = .snapshot(raw: event)
                    case .changeset(let changeset): change = .changed(changeset, raw: event)
                    case .dropped: change = .dropped
                    }
                    mirrors[name] = mirror
                    if let version = mirror.version, let epoch = mirror.epoch {
                        positions[name] = Position(version: version, epoch: epoch)
                    } else {
                        positions[name] = nil
                    }
                    sink.yield(Update(collection: name, change: change, mirror: mirror))
                } catch {
                    sink.yield(Update(collection: name, change: .diverged(error.description), mirror: mirror))
                    positions[name] = nil
                    resynchronizing.insert(name)
                    _ = try? await connection.call(["op": "subscribe", "collection": .string(name)])
                }
            }
            if Task.isCancelled { break }
            sink.yield(Update(collection: nil, change: .disconnected("the connection ended"), mirror: .init()))
            try await Task.sleep(for: backoff)
        }
    }
}

import DiffcastCore
import DiffcastEngine
import DiffcastHTTP
import DiffcastWire
import Logging

/// What the fan-out asks of the loop that owns the connections: it never touches a socket.
protocol FanOutHost: AnyObject {
    func connection(_ id: ConnectionID) -> Connection?
    /// Hands a job (a catch-up, a window left) to the apply queue, in order with the loop's own.
    func submit(_ job: Job)
    /// `connection` has something new to write.
    func needsWrite(_ connection: Connection)
    /// Whether the version being published is sent at once to the subscribers with nothing else
    /// to write (`sendAtOnce`), rather than queued to each.
    var sendsAtOnce: Bool { get }
    /// Writes `bytes` to `connection` now, without queueing them, while `sendsAtOnce`, when the
    /// connection has nothing else to write; false when it did not (the caller queues them).
    func sendAtOnce(_ bytes: SharedBytes, to connection: Connection) -> Bool
    /// Reads no more from `connection`; it is shut down once what it was sent is written.
    func stopReading(_ connection: Connection)
}

/// The subscriber side of the daemon: who follows which collection, and what each connection is
/// sent. It delivers the apply queue's outcomes: answers in request order and after the event
/// of the version they name (read your writes), each published version to every subscriber
/// that holds the version before it, window events to their groups, and the slow-subscriber
/// policy — a connection over its unsent-bytes limit skips events and is caught up with one
/// changeset once it drains, or is disconnected.
///
/// It knows connections only as queues of framed bytes with an unsent count; the loop writes
/// them (`FanOutHost`). So its tests run without a socket.
final class FanOut {
    struct Policy {
        /// A subscriber's unsent bytes: past `high` it is behind, and it is caught up once they
        /// have drained to `low`.
        var unsentBytes: WaterMarks
        var slowSubscribers: ServerConfiguration.SlowSubscriberPolicy
    }

    /// What `stats` and the metrics report of the fan-out (counted here once; the metrics take
    /// their growth when scraped).
    struct Counters {
        var eventsQueued: UInt64 = 0
        var bytesQueued: UInt64 = 0
        var catchUps: UInt64 = 0
        var slowDisconnects: UInt64 = 0
    }

    var policy: Policy
    private(set) var counters = Counters()
    private unowned let host: any FanOutHost
    private let logger: Logger
    /// Frames the WebSocket text frames that events go out in (`FramedEvent`).
    private let webSocketFramer = WebSocketCodec(maximumMessageBytes: 1)
    /// Whole subscribers by collection.
    private var subscribers: [String: SubscriberList<Connection>] = [:]
    /// Windowed subscribers by collection and window group: a version's window event goes to
    /// the members of its group, and a version outside every window touches none of them.
    private var windowSubscribers: [String: [WindowGroupID: Set<ConnectionID>]] = [:]
    /// The last version published of each collection with whole subscribers: a catch-up made
    /// before a later version was published (the versions it skipped while catching up) is
    /// followed by another.
    private var publishedVersions: [String: UInt64] = [:]

    init(policy: Policy, host: any FanOutHost, logger: Logger) {
        self.policy = policy
        self.host = host
        self.logger = logger
    }

    /// Sends what an outcome says to send. `list`, `stats` and the storage state are finished by
    /// the loop (`Server.deliver`), which knows more than subscriptions.
    func deliver(_ outcome: Outcome) {
        switch outcome {
        case .response(let address, let response):
            respond(address, response.bytes)
        case .relayed(let address, let bytes):
            respond(address, bytes)
        case .acknowledged(let address, let response, let mark, let writes):
            respond(address, response.bytes, writes: writes, after: mark)
        case .published(let name, let from, let to, let event, let windows):
            publish(collection: name, from: from, to: to, event: event.bytes)
            for delivery in windows { publish(collection: name, to: to, delivery) }
        case .subscribed(let address, let name, let version, let event, let response, let window):
            subscribed(
                address, collection: name, version: version, event: event?.bytes, response: response.bytes,
                window: window)
        case .rewindowed(let address, let name, let version, let join, let event, let response):
            rewindowed(address, collection: name, version: version, join: join, event: event, response: response.bytes)
        case .caughtUp(let id, let name, let version, let event, let range):
            caughtUp(connection: id, collection: name, version: version, event: event?.bytes, window: range)
        case .dropped(let name):
            dropped(collection: name)
        case .listing, .statistics, .storage:
            break
        }
    }

    // MARK: - Answers

    /// Places an answer (the same one to `writes` requests in consecutive slots); it leaves in
    /// request order, and a write's only once the connection has been sent the event of
    /// `mark`'s version (if it follows that collection).
    func respond(_ address: ResponseAddress, _ bytes: SharedBytes, writes: Int = 1, after mark: VersionMark? = nil) {
        guard let connection = host.connection(address.connection) else { return }
        connection.answer(slot: address.slot, bytes, requests: writes, after: mark)
        host.needsWrite(connection)
    }

    // MARK: - Versions

    /// Queues the same event bytes to every subscriber that holds `from`; one that is over its
    /// unsent-bytes limit is skipped and caught up once it drains (or disconnected, by policy).
    ///
    /// - Complexity: O(subscribers of the collection); the event is framed once per transport
    ///   and each subscriber's queue takes a reference to the shared bytes, not a copy.
    func publish(collection name: String, from: UInt64, to: UInt64, event: SharedBytes) {
        guard let members = subscribers[name]?.members else { return }
        publishedVersions[name] = to
        let event = FramedEvent(event, webSocketFramer: webSocketFramer)
        // Every use of the unowned `host` takes a strong reference for its call: taken once here,
        // the loop over the subscribers takes none.
        let host = self.host
        let sendsAtOnce = host.sendsAtOnce
        for connection in members {
            let withinUnsentLimit = !policy.unsentBytes.isAbove(connection.unsentBytes)
            switch connection.subscriptions.advance(name, from: from, to: to, withinUnsentLimit: withinUnsentLimit) {
            case .advanced?:
                queue(event, to: connection, host: host, sendingAtOnce: sendsAtOnce)
                releaseAnswers(of: connection)
            case .behind?:
                fallBehind(connection, in: name)
            case .lagging?, nil:
                continue
            }
        }
    }

    /// Sends a window's event to the subscribers of its group, each with the `from` of its own
    /// previous event (nearly always one value, so the line is made once); one over its
    /// unsent-bytes limit is caught up later, as for whole subscribers.
    func publish(collection name: String, to version: UInt64, _ delivery: WindowDelivery) {
        guard let members = windowSubscribers[name]?[delivery.group] else { return }
        var made: (from: UInt64, event: FramedEvent)?
        for id in members {
            guard let connection = host.connection(id), let subscription = connection.subscriptions[name],
                let window = subscription.window, window.group == delivery.group, !subscription.isLagging
            else { continue }
            guard !policy.unsentBytes.isAbove(connection.unsentBytes) else {
                fallBehind(connection, in: name)
                continue
            }
            if made?.from != window.eventVersion {
                let line = SharedBytes(delivery.event.bytes(from: window.eventVersion))
                made = (window.eventVersion, FramedEvent(line, webSocketFramer: webSocketFramer))
            }
            if let made { queue(made.event, to: connection) }
            connection.subscriptions[name]?.window = WindowedView(
                group: delivery.group, eventVersion: version, range: delivery.range)
            releaseAnswers(of: connection)
        }
    }

    /// A collection was dropped: its subscribers are told, and their subscriptions end.
    func dropped(collection name: String) {
        let event = FramedEvent(
            SharedBytes(WireEncoder.droppedEvent(collection: name)), webSocketFramer: webSocketFramer)
        let windowed = windowSubscribers.removeValue(forKey: name)?.values.flatMap { $0 } ?? []
        publishedVersions[name] = nil
        for id in Set(subscribers.removeValue(forKey: name)?.ids ?? []).union(windowed) {
            guard let connection = host.connection(id) else { continue }
            connection.subscriptions[name] = nil
            queue(event, to: connection)
            releaseAnswers(of: connection)
        }
    }

    // MARK: - Subscriptions

    /// A subscription made at `version`: `event` (its snapshot or catch-up) is queued first, then
    /// the answer.
    func subscribed(
        _ address: ResponseAddress, collection name: String, version: UInt64, event: SharedBytes?,
        response: SharedBytes, window: WindowJoin?
    ) {
        guard let connection = host.connection(address.connection) else {
            // Gone before its subscription was made: its window is not computed any more.
            if window != nil { host.submit(.leaveWindow(connection: address.connection, collection: name)) }
            return
        }
        if let event { queue(FramedEvent(event, webSocketFramer: webSocketFramer), to: connection) }
        install(
            Subscription(
                version: version,
                window: window.map { WindowedView(group: $0.group, eventVersion: version, range: $0.range) }),
            of: connection, to: name)
        logger.debug(
            "subscribed",
            metadata: ["connection": "\(connection.id)", "collection": "\(name)", "version": "\(version)"])
        respond(address, response)
        releaseAnswers(of: connection)
    }

    /// The answer to a `window` op: the subscriber is sent the changeset to its new window's
    /// view first, or, when it is behind, the answer waits for its catch-up (which the apply
    /// queue computes under the new window).
    func rewindowed(
        _ address: ResponseAddress, collection name: String, version: UInt64, join: WindowJoin, event: WindowEvent?,
        response: SharedBytes
    ) {
        guard let connection = host.connection(address.connection), var subscription = connection.subscriptions[name],
            var window = subscription.window
        else { return respond(address, response) }
        window.group = join.group
        if subscription.isLagging {
            subscription.window = window
            install(subscription, of: connection, to: name)
            return respond(address, response, after: VersionMark(collection: name, version: version))
        }
        if let event {
            let line = SharedBytes(event.bytes(from: window.eventVersion))
            queue(FramedEvent(line, webSocketFramer: webSocketFramer), to: connection)
            window.eventVersion = version
            window.range = join.range
        }
        subscription.window = window
        install(subscription, of: connection, to: name)
        respond(address, response)
    }

    /// A subscriber that was behind is brought to `version` by `event` (none: it already held
    /// what it needs); a windowed one now holds the view of `window`.
    func caughtUp(
        connection id: ConnectionID, collection name: String, version: UInt64, event: SharedBytes?,
        window range: WindowRange?
    ) {
        guard let connection = host.connection(id), var subscription = connection.subscriptions[name] else { return }
        counters.catchUps += 1
        if let event { queue(FramedEvent(event, webSocketFramer: webSocketFramer), to: connection) }
        subscription.version = version
        subscription.delivery = .current
        if range == nil, subscription.window == nil, let published = publishedVersions[name], published > version {
            // Versions published while the catch-up was made went past this subscriber: it is
            // behind again, and is caught up once more when it has drained.
            subscription.delivery = .lagging
            connection.subscriptions[name] = subscription
            connection.mayHaveLaggingSubscriptions = true
            requestCatchUpsIfDrained(connection)
            releaseAnswers(of: connection)
            return
        }
        if let range, event != nil {
            subscription.window?.eventVersion = version
            subscription.window?.range = range
        }
        connection.subscriptions[name] = subscription
        releaseAnswers(of: connection)
    }

    /// Puts a connection's subscription in place, replacing the one it had (the apply queue
    /// already let go of that one's window).
    func install(_ subscription: Subscription, of connection: Connection, to name: String) {
        removeSubscription(of: connection, to: name, tellingTheEngine: false)
        connection.subscriptions[name] = subscription
        if subscription.delivery == .lagging { connection.mayHaveLaggingSubscriptions = true }
        if let window = subscription.window {
            windowSubscribers[name, default: [:]][window.group, default: []].insert(connection.id)
        } else {
            subscribers[name, default: SubscriberList()].insert(connection)
        }
    }

    /// Ends a connection's subscription. One that the loop ends by itself (unsubscribe, a closed
    /// connection; not a `subscribe` replacing it, not a `drop`) tells the apply queue, which
    /// computes its window.
    func removeSubscription(of connection: Connection, to name: String, tellingTheEngine: Bool) {
        guard let subscription = connection.subscriptions.removeValue(forKey: name) else { return }
        if let window = subscription.window {
            windowSubscribers[name]?[window.group]?.remove(connection.id)
            if windowSubscribers[name]?[window.group]?.isEmpty == true { windowSubscribers[name]?[window.group] = nil }
            if windowSubscribers[name]?.isEmpty == true { windowSubscribers[name] = nil }
            if tellingTheEngine { host.submit(.leaveWindow(connection: connection.id, collection: name)) }
        } else {
            subscribers[name]?.remove(connection.id)
            if subscribers[name]?.isEmpty == true { subscribers[name] = nil }
        }
    }

    /// Ends a subscription its holder may no longer read: `revoked` is its last event.
    func revoke(_ connection: Connection, from name: String, message: String) {
        guard connection.subscriptions[name] != nil else { return }
        removeSubscription(of: connection, to: name, tellingTheEngine: true)
        let event = FramedEvent(
            SharedBytes(WireEncoder.revokedEvent(collection: name, message: message)), webSocketFramer: webSocketFramer)
        queue(event, to: connection)
        releaseAnswers(of: connection)
    }

    /// Ends every subscription of a connection that is going away.
    func removeSubscriptions(of connection: Connection) {
        for name in connection.subscriptions.names {
            removeSubscription(of: connection, to: name, tellingTheEngine: true)
        }
    }

    /// Subscribers of a collection, whole and windowed.
    func subscriberCount(of name: String) -> Int {
        (subscribers[name]?.count ?? 0) + (windowSubscribers[name]?.values.reduce(0) { $0 + $1.count } ?? 0)
    }

    /// Collections with at least one subscriber.
    var subscribedCollectionCount: Int {
        Set(subscribers.keys).union(windowSubscribers.keys).count
    }

    /// Subscriptions of every connection.
    var subscriptionCount: Int {
        subscribers.values.reduce(0) { $0 + $1.count }
            + windowSubscribers.values.reduce(0) { total, groups in total + groups.values.reduce(0) { $0 + $1.count } }
    }

    // MARK: - Slow subscribers

    /// Asks for the catch-ups of a connection's lagging subscriptions once it has drained to half
    /// its limit; call it whenever its unsent bytes fall (after every write: so a connection
    /// with none lagging, nearly every one, answers from one flag).
    func requestCatchUpsIfDrained(_ connection: Connection) {
        guard connection.mayHaveLaggingSubscriptions, policy.unsentBytes.hasDrained(connection.unsentBytes) else {
            return
        }
        connection.mayHaveLaggingSubscriptions = false
        for (name, subscription) in connection.subscriptions where subscription.delivery == .lagging {
            connection.subscriptions[name]?.delivery = .catchingUp
            host.submit(
                .catchUp(
                    connection: connection.id, collection: name, since: subscription.version,
                    window: subscription.window?.range))
        }
    }

    /// A subscriber over its limit, or not at the version an event starts from: disconnected by
    /// policy, or left at what it holds until it drains and is caught up.
    private func fallBehind(_ connection: Connection, in name: String) {
        if policy.slowSubscribers == .disconnect {
            disconnectSlow(connection)
            return
        }
        guard var subscription = connection.subscriptions[name] else { return }
        subscription.delivery = .lagging
        // A windowed subscriber holds the view it was last sent.
        if let window = subscription.window { subscription.version = window.eventVersion }
        connection.subscriptions[name] = subscription
        connection.mayHaveLaggingSubscriptions = true
        requestCatchUpsIfDrained(connection)
    }

    /// Drops what is queued for a slow subscriber, sends it one error line and closes it once
    /// that is written.
    private func disconnectSlow(_ connection: Connection) {
        counters.slowDisconnects += 1
        logger.warning("disconnecting a slow subscriber", metadata: ["connection": "\(connection.id)"])
        removeSubscriptions(of: connection)
        host.stopReading(connection)
        connection.pending.discardQueued()
        let limit = policy.unsentBytes.high
        let line = WireEncoder.disconnectEvent(
            code: "limit_exceeded", message: "more than \(limit) bytes unsent (max_unsent_bytes): disconnected")
        queue(FramedEvent(SharedBytes(line), webSocketFramer: webSocketFramer), to: connection)
    }

    /// Queues the answers of `connection` that its subscriptions' progress released, and tells
    /// the loop. The event they waited for was announced before them, as events alone, which
    /// wait their turn; announced again, the connection holds an answer and is written at once,
    /// event first. An answer released with no event (a catch-up that found nothing to send)
    /// would otherwise wait for the connection's next write.
    private func releaseAnswers(of connection: Connection) {
        if connection.releaseAnswers() { host.needsWrite(connection) }
    }

    /// Queues an event whose framed bytes other subscribers may share.
    private func queue(_ event: FramedEvent, to connection: Connection) {
        queue(event, to: connection, host: host)
    }

    /// The same, with `host` held by the caller (`publish`, once for all its subscribers), which
    /// may have the host send the event at once instead (`FanOutHost.sendsAtOnce`).
    private func queue(
        _ event: FramedEvent, to connection: Connection, host: any FanOutHost, sendingAtOnce: Bool = false
    ) {
        guard event.line.count > 0 else { return }
        counters.eventsQueued += 1
        counters.bytesQueued += UInt64(event.line.count)
        if sendingAtOnce, host.sendAtOnce(event.line, to: connection) { return }
        connection.enqueue(event: event)
        host.needsWrite(connection)
    }
}

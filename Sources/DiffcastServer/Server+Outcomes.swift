import CLibUV
import DiffcastCore
import DiffcastEngine
import DiffcastHTTP
import DiffcastWire
import Glibc
import Logging

/// What the apply queue hands back, delivered: answers in request order, events fanned out to
/// subscribers with the slow-subscriber policy, `list` and `stats` finished with what the loop knows.
extension Server {
    // MARK: - Outcomes

    func drainMailbox() {
        guard let mailbox else { return }
        for outcome in mailbox.take() {
            apply(outcome)
        }
        submitPendingJobs()
        flushDirty()
    }

    func apply(_ outcome: Outcome) {
        switch outcome {
        case .response(let address, let response):
            respond(address, response.bytes)
        case .acknowledged(let address, let response, let mark):
            respond(address, response.bytes, after: mark)
        case .published(let name, let from, let to, let event, let windows):
            fanOut(collection: name, from: from, to: to, event: event.bytes)
            for delivery in windows { fanOut(collection: name, to: to, delivery) }
        case .subscribed(let address, let name, let version, let event, let response, let window):
            guard let connection = connections[address.connection] else {
                // Gone before its subscription was made: its window is not computed any more.
                if window != nil { pendingJobs.append(.leaveWindow(connection: address.connection, collection: name)) }
                return
            }
            if let event { queue(event.bytes, to: connection) }
            install(
                Subscription(
                    version: version,
                    window: window.map { WindowedView(group: $0.group, eventVersion: version, range: $0.range) }),
                of: connection, to: name)
            logger.debug(
                "subscribed",
                metadata: ["connection": "\(connection.id)", "collection": "\(name)", "version": "\(version)"])
            respond(address, response.bytes)
            connection.releaseAnswers()
        case .rewindowed(let address, let name, let version, let join, let event, let response):
            rewindow(address, name, version, join, event, response.bytes)
        case .caughtUp(let id, let name, let version, let event, let range):
            guard let connection = connections[id], var subscription = connection.subscriptions[name] else { return }
            counters.catchUps += 1
            metrics?.catchUps.increment()
            if let event { queue(event.bytes, to: connection) }
            subscription.version = version
            subscription.isLagging = false
            subscription.catchUpRequested = false
            if let range, event != nil {
                subscription.window?.eventVersion = version
                subscription.window?.range = range
            }
            connection.subscriptions[name] = subscription
            connection.releaseAnswers()
        case .dropped(let name):
            let event = FramedEvent(
                SharedBytes(WireEncoder.droppedEvent(collection: name)), webSocketFramer: webSocketFramer)
            let windowed = windowSubscribers.removeValue(forKey: name)?.values.flatMap { $0 } ?? []
            for id in (subscribers.removeValue(forKey: name) ?? []).union(windowed) {
                guard let connection = connections[id] else { continue }
                connection.subscriptions[name] = nil
                queue(event, to: connection)
                connection.releaseAnswers()
            }
        case .listing(let address, let id, let rows):
            let bytes = WireEncoder.success(id: id, op: "list") { output in
                output.appendRaw(",\"collections\":[")
                for (index, row) in rows.enumerated() {
                    output.appendRaw(index == 0 ? "{\"name\":" : ",{\"name\":")
                    output.append(string: row.name)
                    Self.append(
                        [
                            (",\"version\":", row.version), (",\"sections\":", UInt64(row.sections)),
                            (",\"items\":", UInt64(row.items)),
                            (",\"subscribers\":", UInt64(subscriberCount(of: row.name))),
                        ], to: &output)
                    output.appendRaw("}")
                }
                output.appendRaw("]")
            }
            respond(address, SharedBytes(bytes))
        case .statistics(let address, let id, let applied):
            respond(address, SharedBytes(statisticsResponse(id: id, applied)))
        case .storage(let reason):
            readOnlyReason = reason
            metrics?.readOnly.set(Int64(reason == nil ? 0 : 1))
            systemd.notify("STATUS=\(statusLine())")
        }
    }

    /// Appends `,"key":count` members (each key given with its comma, quotes and colon).
    static func append(_ fields: [(StaticString, UInt64)], to output: inout JSONOutput) {
        for (key, value) in fields {
            output.appendRaw(key)
            output.append(value)
        }
    }

    func statisticsResponse(id: JSONText?, _ applied: ApplyStatistics) -> [UInt8] {
        WireEncoder.success(id: id, op: "stats") { output in
            let fields: [(StaticString, UInt64)] = [
                (",\"connections\":", UInt64(clientConnectionCount)),
                (",\"connections_accepted\":", counters.connectionsAccepted),
                (",\"subscriptions\":", UInt64(subscriptionCount)),
                (",\"collections\":", UInt64(applied.collections)),
                (",\"requests\":", counters.requests),
                (",\"writes_applied\":", applied.writesApplied),
                (",\"writes_rejected\":", applied.writesRejected),
                (",\"versions_published\":", applied.versionsPublished),
                (",\"apply_batches\":", applied.batches),
                (",\"events_queued\":", counters.eventsQueued),
                (",\"bytes_queued\":", counters.bytesQueued),
                (",\"catch_ups\":", counters.catchUps),
                (",\"slow_disconnects\":", counters.slowDisconnects),
                (",\"log_syncs\":", applied.logSyncs),
            ]
            Self.append(fields, to: &output)
            if let backbone = applied.backbone {
                output.appendRaw(",\"backbone\":{\"node\":")
                output.append(string: backbone.node)
                Self.append(
                    [
                        (",\"owned_collections\":", UInt64(backbone.ownedCollections)),
                        (",\"log_applied\":", backbone.logApplied),
                        (",\"writes_forwarded\":", backbone.writesForwarded),
                        (",\"log_skipped\":", backbone.logSkipped),
                        (",\"log_behind\":", backbone.logBehind),
                    ], to: &output)
                output.appendRaw("}")
            }
            output.appendRaw(",\"read_only\":")
            if let reason = applied.readOnlyReason {
                output.appendRaw("true,\"read_only_reason\":")
                output.append(string: reason)
            } else {
                output.appendRaw("false")
            }
        }
    }

    func respond(_ address: ResponseAddress, _ bytes: SharedBytes, after mark: VersionMark? = nil) {
        guard let connection = connections[address.connection] else { return }
        connection.answer(slot: address.slot, bytes, after: mark)
        dirty.insert(connection.id)
    }

    func queue(_ event: SharedBytes, to connection: Connection) {
        queue(FramedEvent(event, webSocketFramer: webSocketFramer), to: connection)
    }

    /// Queues an event whose framed bytes other subscribers may share.
    func queue(_ event: FramedEvent, to connection: Connection) {
        guard event.line.count > 0 else { return }
        counters.eventsQueued += 1
        counters.bytesQueued += UInt64(event.line.count)
        metrics?.eventsQueued.increment()
        metrics?.bytesQueued.increment(by: Int64(event.line.count))
        connection.enqueue(event: event)
        dirty.insert(connection.id)
    }

    /// Writes the same event bytes to every subscriber that holds `from`; one that is over its
    /// unsent-bytes limit is skipped and caught up once it drains (or disconnected, by policy).
    func fanOut(collection name: String, from: UInt64, to: UInt64, event: SharedBytes) {
        guard let ids = subscribers[name] else { return }
        let event = FramedEvent(event, webSocketFramer: webSocketFramer)
        for id in ids {
            guard let connection = connections[id], let subscription = connection.subscriptions[name],
                !subscription.isLagging
            else { continue }
            if subscription.version == from && connection.unsentBytes <= configuration.maximumUnsentBytes {
                queue(event, to: connection)
                connection.subscriptions[name]?.version = to
                connection.releaseAnswers()
            } else if configuration.slowSubscriberPolicy == .disconnect {
                disconnectSlow(connection)
            } else {
                connection.subscriptions[name]?.isLagging = true
                requestCatchUpsIfDrained(connection)
            }
        }
    }

    /// Drops what is queued for a slow subscriber, sends it one error line and closes it once
    /// that is written.
    func disconnectSlow(_ connection: Connection) {
        counters.slowDisconnects += 1
        metrics?.slowDisconnects.increment()
        logger.warning("disconnecting a slow subscriber", metadata: ["connection": "\(connection.id)"])
        for name in Array(connection.subscriptions.keys) {
            removeSubscription(of: connection, to: name, tellingTheEngine: true)
        }
        stopReading(connection)
        connection.discardOutbound()
        let limit = configuration.maximumUnsentBytes
        queue(
            SharedBytes(
                WireEncoder.disconnectEvent(
                    code: "limit_exceeded",
                    message: "more than \(limit) bytes unsent (max_unsent_bytes): disconnected")),
            to: connection)
    }

    func requestCatchUpsIfDrained(_ connection: Connection) {
        guard connection.unsentBytes <= configuration.maximumUnsentBytes / 2 else { return }
        for (name, subscription) in connection.subscriptions
        where subscription.isLagging && !subscription.catchUpRequested {
            connection.subscriptions[name]?.catchUpRequested = true
            pendingJobs.append(
                .catchUp(
                    connection: connection.id, collection: name, since: subscription.version,
                    window: subscription.window?.range))
        }
    }

    /// Sends a window's event to the subscribers of its group, each with the `from` of its own
    /// previous event (nearly always one value, so the line is made once); one over its
    /// unsent-bytes limit is caught up later, as for whole subscribers.
    func fanOut(collection name: String, to version: UInt64, _ delivery: WindowDelivery) {
        guard let members = windowSubscribers[name]?[delivery.group] else { return }
        var made: (from: UInt64, event: FramedEvent)?
        for id in members {
            guard let connection = connections[id], let subscription = connection.subscriptions[name],
                let window = subscription.window, window.group == delivery.group, !subscription.isLagging
            else { continue }
            guard connection.unsentBytes <= configuration.maximumUnsentBytes else {
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
            connection.releaseAnswers()
        }
    }

    /// A windowed subscriber over its limit: disconnected by policy, or left at the view it
    /// holds until it drains and is caught up.
    private func fallBehind(_ connection: Connection, in name: String) {
        if configuration.slowSubscriberPolicy == .disconnect {
            disconnectSlow(connection)
            return
        }
        guard var subscription = connection.subscriptions[name], let window = subscription.window else { return }
        subscription.isLagging = true
        subscription.version = window.eventVersion
        connection.subscriptions[name] = subscription
        requestCatchUpsIfDrained(connection)
    }

    /// The answer to a `window` op: the subscriber is sent the changeset to its new window's
    /// view first, or, when it is behind, the answer waits for its catch-up (which the apply
    /// queue computes under the new window).
    private func rewindow(
        _ address: ResponseAddress, _ name: String, _ version: UInt64, _ join: WindowJoin, _ event: WindowEvent?,
        _ response: SharedBytes
    ) {
        guard let connection = connections[address.connection], var subscription = connection.subscriptions[name],
            var window = subscription.window
        else { return respond(address, response) }
        window.group = join.group
        if subscription.isLagging {
            subscription.window = window
            install(subscription, of: connection, to: name)
            return respond(address, response, after: VersionMark(collection: name, version: version))
        }
        if let event { queue(SharedBytes(event.bytes(from: window.eventVersion)), to: connection) }
        if event != nil {
            window.eventVersion = version
            window.range = join.range
        }
        subscription.window = window
        install(subscription, of: connection, to: name)
        respond(address, response)
    }
}

import CLibUV
import DiffcastCore
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
        case .response(let address, let bytes):
            respond(address, bytes)
        case .acknowledged(let address, let bytes, let mark):
            respond(address, bytes, after: mark)
        case .published(let name, let from, let to, let event):
            fanOut(collection: name, from: from, to: to, event: event)
        case .subscribed(let address, let name, let version, let event, let response):
            guard let connection = connections[address.connection] else { return }
            if let event { queue(event, to: connection) }
            connection.subscriptions[name] = Subscription(version: version)
            subscribers[name, default: []].insert(connection.id)
            logger.debug(
                "subscribed",
                metadata: ["connection": "\(connection.id)", "collection": "\(name)", "version": "\(version)"])
            respond(address, response)
            connection.releaseAnswers()
        case .caughtUp(let id, let name, let version, let event):
            guard let connection = connections[id], connection.subscriptions[name] != nil else { return }
            counters.catchUps += 1
            metrics?.catchUps.increment()
            queue(event, to: connection)
            connection.subscriptions[name] = Subscription(version: version)
            connection.releaseAnswers()
        case .dropped(let name):
            let event = SharedBytes(WireEncoder.droppedEvent(collection: name))
            for id in subscribers.removeValue(forKey: name) ?? [] {
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
                            (",\"subscribers\":", UInt64(subscribers[row.name]?.count ?? 0)),
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
                (",\"connections\":", UInt64(connections.count)),
                (",\"connections_accepted\":", counters.connectionsAccepted),
                (",\"subscriptions\":", UInt64(subscribers.values.reduce(0) { $0 + $1.count })),
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
        guard event.count > 0 else { return }
        counters.eventsQueued += 1
        counters.bytesQueued += UInt64(event.count)
        metrics?.eventsQueued.increment()
        metrics?.bytesQueued.increment(by: Int64(event.count))
        connection.enqueue(event: event)
        dirty.insert(connection.id)
    }

    /// Writes the same event bytes to every subscriber that holds `from`; one that is over its
    /// unsent-bytes limit is skipped and caught up once it drains (or disconnected, by policy).
    func fanOut(collection name: String, from: UInt64, to: UInt64, event: SharedBytes) {
        guard let ids = subscribers[name] else { return }
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
        for name in connection.subscriptions.keys {
            removeSubscription(of: connection, to: name)
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
            pendingJobs.append(.catchUp(connection: connection.id, collection: name, since: subscription.version))
        }
    }
}

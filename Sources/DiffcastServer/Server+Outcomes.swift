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
            deliver(outcome)
        }
        submitPendingJobs()
        flushDirty()
    }

    /// Delivers one outcome: the fan-out sends answers and events; `list` and `stats` are
    /// finished here, with what the loop knows.
    func deliver(_ outcome: Outcome) {
        switch outcome {
        case .response, .relayed, .acknowledged, .published, .subscribed, .rewindowed, .caughtUp, .dropped:
            fanOut.deliver(outcome)
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
                            (",\"subscribers\":", UInt64(fanOut.subscriberCount(of: row.name))),
                        ], to: &output)
                    output.appendRaw("}")
                }
                output.appendRaw("]")
            }
            fanOut.respond(address, SharedBytes(bytes))
        case .statistics(let address, let id, let applied):
            fanOut.respond(address, SharedBytes(statisticsResponse(id: id, applied)))
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
                (",\"subscriptions\":", UInt64(fanOut.subscriptionCount)),
                (",\"collections\":", UInt64(applied.collections)),
                (",\"requests\":", counters.requests),
                (",\"writes_applied\":", applied.writesApplied),
                (",\"writes_rejected\":", applied.writesRejected),
                (",\"versions_published\":", applied.versionsPublished),
                (",\"apply_batches\":", applied.batches),
                (",\"events_queued\":", fanOut.counters.eventsQueued),
                (",\"bytes_queued\":", fanOut.counters.bytesQueued),
                (",\"catch_ups\":", fanOut.counters.catchUps),
                (",\"slow_disconnects\":", fanOut.counters.slowDisconnects),
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
}

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
        flushMarked()
    }

    /// Delivers one outcome: the fan-out sends answers and events; `list` and `stats` are
    /// finished here, with what the loop knows.
    func deliver(_ outcome: Outcome) {
        switch outcome {
        case .response, .relayed, .acknowledged, .published, .subscribed, .rewindowed, .caughtUp, .dropped:
            fanOut.deliver(outcome)
        case .listing(let address, let id, let rows):
            let rows = rows.map { row in
                var row = row
                row.subscribers = fanOut.subscriberCount(of: row.name)
                return row
            }
            fanOut.respond(address, SharedBytes(WireEncoder.encode(.success(id: id, op: "list", .collections(rows)))))
        case .statistics(let address, let id, let applied):
            let report = statisticsReport(applied)
            fanOut.respond(address, SharedBytes(WireEncoder.encode(.success(id: id, op: "stats", .statistics(report)))))
        case .storage(let reason):
            readOnlyReason = reason
            metrics?.readOnly.set(Int64(reason == nil ? 0 : 1))
            systemd.notify("STATUS=\(statusLine())")
        }
    }

    /// `stats`: the loop's counters with the apply queue's, in the order they have always been written.
    func statisticsReport(_ applied: ApplyStatistics) -> StatisticsReport {
        StatisticsReport(
            counters: [
                ("connections", UInt64(clientConnectionCount)),
                ("connections_accepted", counters.connectionsAccepted),
                ("subscriptions", UInt64(fanOut.subscriptionCount)),
                ("collections", UInt64(applied.collections)),
                ("requests", counters.requests),
                ("writes_applied", applied.writesApplied),
                ("writes_rejected", applied.writesRejected),
                ("versions_published", applied.versionsPublished),
                ("apply_batches", applied.batches),
                ("events_queued", fanOut.counters.eventsQueued),
                ("bytes_queued", fanOut.counters.bytesQueued),
                ("catch_ups", fanOut.counters.catchUps),
                ("slow_disconnects", fanOut.counters.slowDisconnects),
                ("log_syncs", applied.logSyncs),
                ("denials", counters.denials),
                ("auth_failures", counters.authFailures),
            ],
            backbone: applied.backbone.map { backbone in
                (
                    backbone.node,
                    [
                        ("owned_collections", UInt64(backbone.ownedCollections)),
                        ("log_applied", backbone.logApplied),
                        ("writes_forwarded", backbone.writesForwarded),
                        ("log_skipped", backbone.logSkipped),
                        ("log_behind", backbone.logBehind),
                    ]
                )
            },
            readOnlyReason: applied.readOnlyReason)
    }
}

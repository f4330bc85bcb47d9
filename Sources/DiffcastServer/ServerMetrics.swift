import DiffcastEngine
import Prometheus

/// The daemon's Prometheus metrics: what a service owner graphs and alerts on. Made only when
/// `--metrics` is given; every metric is thread-safe, so the loop thread and the apply queue
/// record into it directly.
public final class ServerMetrics: Sendable {
    let registry = PrometheusCollectorRegistry()

    let connections: Gauge
    let connectionsAccepted: Counter
    let requests: Counter
    let applyBatches: Counter
    let subscriptions: Gauge
    let collections: Gauge
    let writesApplied: Counter
    let writesRejected: Counter
    let versionsPublished: Counter
    let eventsQueued: Counter
    let bytesQueued: Counter
    let catchUps: Counter
    let slowDisconnects: Counter
    let denials: Counter
    let authFailures: Counter
    let readOnly: Gauge
    let backboneLogBehind: Gauge
    let applyBatchSeconds: DurationHistogram
    let writeAcknowledgementSeconds: DurationHistogram
    let logSyncSeconds: DurationHistogram

    private static let latencyBuckets: [Duration] = [
        .microseconds(50), .microseconds(100), .microseconds(250), .microseconds(500), .milliseconds(1),
        .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50),
        .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(5),
    ]

    public init() {
        let registry = self.registry
        func name(_ metric: String, _ unit: String, _ help: String) -> MetricNameDescriptor {
            MetricNameDescriptor(namespace: "diffcast", metricName: metric, unitName: unit, helpText: help)
        }
        func counter(_ metric: String, _ help: String) -> Counter {
            registry.makeCounter(descriptor: name(metric, "total", help))
        }
        func gauge(_ metric: String, _ help: String) -> Gauge {
            registry.makeGauge(descriptor: name(metric, "", help))
        }
        func latency(_ metric: String, _ help: String) -> DurationHistogram {
            registry.makeDurationHistogram(descriptor: name(metric, "seconds", help), buckets: Self.latencyBuckets)
        }
        connections = gauge("connections", "Client connections open now.")
        connectionsAccepted = counter("connections_accepted", "Client connections accepted.")
        requests = counter("requests", "Request lines read from clients.")
        applyBatches = counter("apply_batches", "Batches the apply queue applied.")
        subscriptions = gauge("subscriptions", "Subscriptions open now.")
        collections = gauge("collections", "Collections that exist.")
        writesApplied = counter("writes_applied", "Writes applied.")
        writesRejected = counter("writes_rejected", "Writes rejected (bad input, limits, unavailable).")
        versionsPublished = counter("versions_published", "Changesets published (one per new version).")
        eventsQueued = counter("events_queued", "Events queued to clients.")
        bytesQueued = counter("bytes_queued", "Event bytes queued to clients.")
        catchUps = counter("catch_ups", "Catch-ups sent to subscribers that fell behind.")
        slowDisconnects = counter("slow_disconnects", "Slow subscribers disconnected by policy.")
        denials = counter("denials", "Requests, subscriptions and tokens refused for want of a right.")
        authFailures = counter("auth_failures", "Tokens refused (auth, or presented over HTTP).")
        readOnly = gauge("read_only", "1 while writes are refused because the state directory takes none.")
        backboneLogBehind = gauge(
            "backbone_log_behind", "Shared-log sequences the stream held past the last that reached this daemon.")
        applyBatchSeconds = latency("apply_batch", "Time to apply, diff, encode and log one apply-queue batch.")
        writeAcknowledgementSeconds = latency(
            "write_ack", "From a write reaching the apply queue to its answer reaching the loop.")
        logSyncSeconds = latency("log_sync", "fdatasync of the write-ahead log.")
    }

    /// The loop thread's counters (connections, requests, fan-out), as `stats` reports them.
    struct LoopTotals {
        var connectionsAccepted: UInt64 = 0
        var requests: UInt64 = 0
        var eventsQueued: UInt64 = 0
        var bytesQueued: UInt64 = 0
        var catchUps: UInt64 = 0
        var slowDisconnects: UInt64 = 0
        var denials: UInt64 = 0
        var authFailures: UInt64 = 0
    }

    private func grow(_ counter: Counter, _ now: UInt64, _ before: UInt64) {
        if now > before { counter.increment(by: Int64(clamping: now - before)) }
    }

    /// Adds what the loop's counters grew by since `previous` (called before a scrape is
    /// answered, so each event is counted once, on the loop, and the metrics follow).
    func record(_ totals: LoopTotals, since previous: LoopTotals) {
        grow(connectionsAccepted, totals.connectionsAccepted, previous.connectionsAccepted)
        grow(requests, totals.requests, previous.requests)
        grow(eventsQueued, totals.eventsQueued, previous.eventsQueued)
        grow(bytesQueued, totals.bytesQueued, previous.bytesQueued)
        grow(catchUps, totals.catchUps, previous.catchUps)
        grow(slowDisconnects, totals.slowDisconnects, previous.slowDisconnects)
        grow(denials, totals.denials, previous.denials)
        grow(authFailures, totals.authFailures, previous.authFailures)
    }

    /// Adds what the apply queue's counters grew by since `previous`.
    func record(_ statistics: ApplyStatistics, since previous: ApplyStatistics) {
        grow(writesApplied, statistics.writesApplied, previous.writesApplied)
        grow(writesRejected, statistics.writesRejected, previous.writesRejected)
        grow(versionsPublished, statistics.versionsPublished, previous.versionsPublished)
        grow(applyBatches, statistics.batches, previous.batches)
    }

    /// The Prometheus text exposition of every metric.
    func exposition() -> [UInt8] {
        registry.emitToBuffer()
    }
}

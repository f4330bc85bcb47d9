import ArgumentParser
import BenchmarkFixtures
import DiffcastCore
import DiffcastEngine
import DiffcastWire
import Foundation

/// Windows on the apply queue: the cost of a version for 10,000 windowed subscribers (100
/// distinct windows of 50 rows) when a write lands inside one window and when it lands outside
/// all of them, against the same version with no windows (the baseline, measured in the same
/// run); and the bytes a windowed subscriber receives against a whole one.
struct WindowBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "window", abstract: "Windowed subscribers: cost per version inside and outside, bytes received.")

    @Option(help: "Collection sizes.") var sizes: [Int] = [10_000, 100_000, 1_000_000]
    @Option(help: "Windowed subscribers.") var subscribers = 10_000
    @Option(help: "Distinct windows among them.") var windows = 100
    @Option(help: "Versions measured per case.") var versions = 400

    func run() throws {
        emit("## Windows: apply-queue time per version, \(subscribers) windowed subscribers in \(windows) windows\n")
        emit("Each version is one `update_items` of one item; every case includes publishing the version (diff and")
        emit("the whole event). Baseline: the same versions with no windowed subscriber.\n")
        emit(
            "| items | baseline (µs/version) | inside one window (µs) | outside all (µs) | inside / baseline | outside / baseline |"
        )
        emit("|---:|---:|---:|---:|---:|---:|")
        for size in sizes {
            let baseline = try measure(size: size, windowed: false, inside: false)
            let inside = try measure(size: size, windowed: true, inside: true)
            let outside = try measure(size: size, windowed: true, inside: false)
            emit(
                String(
                    format: "| %d | %.1f | %.1f | %.1f | %.2f× | %.2f× |", size, baseline.microseconds,
                    inside.microseconds, outside.microseconds, inside.microseconds / baseline.microseconds,
                    outside.microseconds / baseline.microseconds))
        }
        emit("")
        try printBytes(size: sizes.max() ?? 1_000_000)
    }

    private struct Measurement {
        var microseconds: Double
        var windowEvents: Int
    }

    /// A collection of `size` items in 100 sections; `windows` anchor windows of 50 rows spread
    /// over it, each held by subscribers / windows connections.
    private func setUp(size: Int, windowed: Bool) throws -> (ApplyEngine, anchors: [Int]) {
        let engine = try Fixtures.engineHolding(size: size)
        let perSection = max(1, size / 100)
        let total = perSection * 100
        let anchors = (0..<windows).map { ($0 * total) / windows + total / (2 * windows) }
        guard windowed else { return (engine, anchors) }
        var slot: UInt64 = 1
        for subscriber in 0..<subscribers {
            let anchor = anchors[subscriber % windows]
            let line = "subscribe c {\"window\":{\"anchor\":\"i\(anchor)\",\"before\":10,\"after\":39}}"
            _ = engine.process([try Fixtures.job(line, slot, connection: ConnectionID(subscriber + 1))])
            slot += 1
        }
        return (engine, anchors)
    }

    private func measure(size: Int, windowed: Bool, inside: Bool) throws -> Measurement {
        let (engine, anchors) = try setUp(size: size, windowed: windowed)
        let total = max(1, size / 100) * 100
        // Inside: an item of window k (its anchor + 5); outside: halfway between two windows.
        let targets = (0..<versions).map { version -> Int in
            let anchor = anchors[version % anchors.count]
            return inside ? anchor + 5 : (anchor + total / (2 * windows) + 25) % total
        }
        let jobs = try targets.enumerated().map { index, item in
            try Fixtures.job(
                "update_items c {\"items\":[{\"id\":\"i\(item)\",\"data\":\(index)}]}", UInt64(100_000 + index))
        }
        var windowEvents = 0
        let start = ContinuousClock.now
        for job in jobs {
            for case .published(_, _, _, _, let deliveries) in engine.process([job]) {
                windowEvents += deliveries.count
            }
        }
        let elapsed = seconds(since: start)
        if windowed {
            let expected = inside ? versions : 0
            guard windowEvents == expected else {
                throw ValidationError("\(windowEvents) window events for \(versions) versions (expected \(expected))")
            }
        }
        return Measurement(microseconds: elapsed * 1e6 / Double(versions), windowEvents: windowEvents)
    }

    /// Bytes one subscriber receives: the first event, then the events of `versions` writes spread
    /// evenly over the collection, for a whole subscriber and for a window of 50 rows.
    private func printBytes(size: Int) throws {
        let engine = try Fixtures.engineHolding(size: size)
        let perSection = max(1, size / 100)
        var whole = 0
        var windowed = 0
        for case .subscribed(_, _, _, let event?, _, _) in engine.process([
            try Fixtures.job("subscribe c", 1, connection: 1)
        ]) {
            whole += event.bytes.count
        }
        for case .subscribed(_, _, _, let event?, _, _) in engine.process([
            try Fixtures.job("subscribe c {\"window\":{\"first\":50}}", 2, connection: 2)
        ]) {
            windowed += event.bytes.count
        }
        let first = (whole, windowed)
        let total = perSection * 100
        for version in 0..<versions {
            let item = (version * 7919) % total
            let line = "update_items c {\"items\":[{\"id\":\"i\(item)\",\"data\":\(version)}]}"
            for case .published(_, _, _, let event, let deliveries) in engine.process([
                try Fixtures.job(line, UInt64(10 + version))
            ]) {
                whole += event.bytes.count
                windowed += deliveries.reduce(0) { $0 + $1.event.bytes(from: 0).count }
            }
        }
        emit("## Bytes received by one subscriber of a \(total)-item collection, \(versions) updates spread over it\n")
        emit("| subscriber | first event (bytes) | everything (bytes) | / whole |")
        emit("|---|---:|---:|---:|")
        emit(String(format: "| whole | %d | %d | 1.00× |", first.0, whole))
        emit(
            String(
                format: "| window `first 50` | %d | %d | %.5f× |", first.1, windowed, Double(windowed) / Double(whole)))
        emit("")
    }
}

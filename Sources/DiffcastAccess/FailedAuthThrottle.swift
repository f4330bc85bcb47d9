/// Slows down guessing: after `maximumFailures` refused tokens from one peer address within
/// `windowSeconds`, that address's tokens are refused without being verified for
/// `blockSeconds`. Kept on the loop thread; addresses are forgotten once quiet.
public struct FailedAuthThrottle: Sendable {
    public var maximumFailures = 5
    public var windowSeconds: Double = 10
    public var blockSeconds: Double = 10

    private struct Record {
        var failures: [Double] = []
        var blockedUntil: Double = 0
    }

    private var records: [String: Record] = [:]

    public init() {}

    /// Seconds left while the address is blocked, else nil.
    public func blockedFor(_ address: String, now: Double) -> Double? {
        guard let record = records[address], record.blockedUntil > now else { return nil }
        return record.blockedUntil - now
    }

    /// Counts a refused token; returns true when this failure blocks the address.
    @discardableResult
    public mutating func recordFailure(_ address: String, now: Double) -> Bool {
        var record = records[address] ?? Record()
        record.failures.removeAll { $0 <= now - windowSeconds }
        record.failures.append(now)
        let blocks = record.failures.count >= maximumFailures
        if blocks {
            record.blockedUntil = now + blockSeconds
            record.failures.removeAll()
        }
        records[address] = record
        return blocks
    }

    /// Forgets addresses with no recent failure and no block (called about once a second).
    public mutating func forgetQuiet(now: Double) {
        records = records.filter { _, record in
            record.blockedUntil > now || record.failures.contains { $0 > now - windowSeconds }
        }
    }

    /// Addresses remembered now.
    public var count: Int { records.count }
}

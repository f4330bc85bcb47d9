import DiffcastCore

/// One row of `list`: a collection as the daemon holds it, with how many follow it.
public struct CollectionRow: Sendable, Equatable {
    public var name: String
    public var version: UInt64
    public var sections: Int
    public var items: Int
    public var subscribers: Int

    public init(name: String, version: UInt64, sections: Int, items: Int, subscribers: Int) {
        self.name = name
        self.version = version
        self.sections = sections
        self.items = items
        self.subscribers = subscribers
    }
}

/// What `stats` reports: the loop's counters and the apply queue's, in the order `stats` has always written them.
public struct StatisticsReport: Sendable {
    /// Counters, each written as `"key":N` in this order.
    public var counters: [(key: String, value: UInt64)]
    /// With a backbone: this daemon's name and its counters there.
    public var backbone: (node: String, counters: [(key: String, value: UInt64)])?
    /// Why writes are refused, while they are.
    public var readOnlyReason: String?

    public init(
        counters: [(key: String, value: UInt64)], backbone: (node: String, counters: [(key: String, value: UInt64)])?,
        readOnlyReason: String?
    ) {
        self.counters = counters
        self.backbone = backbone
        self.readOnlyReason = readOnlyReason
    }
}

extension WireEncoder {
    /// `,"collections":[{"name":…,"version":…,"sections":…,"items":…,"subscribers":…},…]`
    static func appendCollections(_ rows: [CollectionRow], into output: inout JSONOutput) {
        output.appendRaw(",\"collections\":[")
        for (index, row) in rows.enumerated() {
            output.appendRaw(index == 0 ? "{\"name\":" : ",{\"name\":")
            output.append(string: row.name)
            output.appendRaw(",\"version\":")
            output.append(row.version)
            output.appendRaw(",\"sections\":")
            output.append(row.sections)
            output.appendRaw(",\"items\":")
            output.append(row.items)
            output.appendRaw(",\"subscribers\":")
            output.append(row.subscribers)
            output.appendRaw("}")
        }
        output.appendRaw("]")
    }

    /// The members of a `stats` answer after its id and op.
    static func appendStatistics(_ report: StatisticsReport, into output: inout JSONOutput) {
        func appendCounters(_ counters: [(key: String, value: UInt64)]) {
            for (key, value) in counters {
                output.appendRaw(",")
                output.append(string: key)
                output.appendRaw(":")
                output.append(value)
            }
        }
        appendCounters(report.counters)
        if let backbone = report.backbone {
            output.appendRaw(",\"backbone\":{\"node\":")
            output.append(string: backbone.node)
            appendCounters(backbone.counters)
            output.appendRaw("}")
        }
        output.appendRaw(",\"read_only\":")
        if let reason = report.readOnlyReason {
            output.appendRaw("true,\"read_only_reason\":")
            output.append(string: reason)
        } else {
            output.appendRaw("false")
        }
    }
}

/// A connection's subscriptions by collection name.
///
/// Nearly every connection follows one collection, and a dictionary of one entry costs a
/// connection a heap allocation of about 240 bytes, a sixth of what the daemon holds per
/// subscriber. So the first subscription is kept inline, and a dictionary is made only for the
/// others (an empty dictionary allocates nothing). Names are unique across the two.
struct SubscriptionTable: Sequence {
    /// One subscription, kept inline.
    private var first: (name: String, subscription: Subscription)?
    /// The others, by name.
    private var others: [String: Subscription] = [:]

    var count: Int { (first == nil ? 0 : 1) + others.count }
    var isEmpty: Bool { first == nil && others.isEmpty }

    /// The collections followed, in no particular order.
    var names: [String] { map(\.name) }

    subscript(name: String) -> Subscription? {
        get {
            if let first, first.name == name { return first.subscription }
            return others.isEmpty ? nil : others[name]
        }
        set {
            guard let newValue else {
                removeValue(forKey: name)
                return
            }
            if first?.name == name {
                first?.subscription = newValue
            } else if first == nil && others[name] == nil {
                first = (name, newValue)
            } else {
                others[name] = newValue
            }
        }
    }

    /// Removes and returns the subscription to `name`, if there is one.
    @discardableResult
    mutating func removeValue(forKey name: String) -> Subscription? {
        if let entry = first, entry.name == name {
            first = nil
            return entry.subscription
        }
        return others.isEmpty ? nil : others.removeValue(forKey: name)
    }

    /// Moves the subscription to `name` as `Subscription.advance` does, in place; nil when there
    /// is none. The inline one is found by comparing one name, with no hashing: this runs once
    /// per subscriber and version.
    mutating func advance(
        _ name: String, from: UInt64, to version: UInt64, withinUnsentLimit: Bool
    ) -> Subscription.Advance? {
        if first?.name == name {
            return first?.subscription.advance(from: from, to: version, withinUnsentLimit: withinUnsentLimit)
        }
        guard !others.isEmpty, let index = others.index(forKey: name) else { return nil }
        return others.values[index].advance(from: from, to: version, withinUnsentLimit: withinUnsentLimit)
    }

    func makeIterator() -> some IteratorProtocol<(name: String, subscription: Subscription)> {
        let inline = first.map { [$0] } ?? []
        return (inline + others.map { (name: $0.key, subscription: $0.value) }).makeIterator()
    }
}

import DiffcastTestSupport
import Testing

@testable import DiffcastServer

/// A connection's subscriptions against a `Dictionary` as the model: whichever of its entries
/// is kept inline, after any sequence of subscribes, changes, advances and removals it holds
/// exactly the model's entries, and each operation answers as the dictionary does.
@Suite struct SubscriptionTableTests {
    /// What `Subscription.advance` does, written out for the model.
    private static func advance(
        _ subscription: inout Subscription, from: UInt64, to: UInt64, withinUnsentLimit: Bool
    ) -> Subscription.Advance {
        if subscription.delivery != .current { return .lagging }
        if subscription.version != from || !withinUnsentLimit { return .behind }
        subscription.version = to
        return .advanced
    }

    private static func entries(of table: SubscriptionTable) -> [String: UInt64] {
        var entries: [String: UInt64] = [:]
        for (name, subscription) in table {
            #expect(entries[name] == nil, "\(name) listed twice")
            entries[name] = subscription.version
        }
        return entries
    }

    @Test func theFirstSubscriptionIsFoundAndTheOthersBesideIt() {
        var table = SubscriptionTable()
        #expect(table.isEmpty && table.count == 0 && table["a"] == nil)
        table["a"] = Subscription(version: 1)
        table["b"] = Subscription(version: 2)
        table["a"] = Subscription(version: 3)
        #expect(table.count == 2 && table["a"]?.version == 3 && table["b"]?.version == 2)
        // The inline one leaves; a new name takes its place, and "b" is still found once.
        #expect(table.removeValue(forKey: "a")?.version == 3)
        table["c"] = Subscription(version: 4)
        table["b"] = Subscription(version: 5)
        #expect(Self.entries(of: table) == ["b": 5, "c": 4])
        #expect(table.advance("b", from: 5, to: 6, withinUnsentLimit: true) == .advanced)
        #expect(table.advance("c", from: 5, to: 6, withinUnsentLimit: true) == .behind)
        #expect(table.advance("d", from: 4, to: 6, withinUnsentLimit: true) == nil)
        #expect(table.names.sorted() == ["b", "c"] && table["b"]?.version == 6)
        table["b"] = nil
        table["c"] = nil
        #expect(table.isEmpty && table.removeValue(forKey: "c") == nil)
    }

    @Test(arguments: [1, 2, 3, 4])
    func randomOperationsMatchADictionary(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        let names = ["a", "b", "c", "d", "a-collection-name-longer-than-fifteen-bytes"]
        var table = SubscriptionTable()
        var model: [String: Subscription] = [:]
        for step in 0..<3_000 {
            let name = names[Int(random.next() % UInt64(names.count))]
            switch random.next() % 6 {
            case 0, 1:
                var subscription = Subscription(version: random.next() % 4)
                if random.next() % 4 == 0 { subscription.delivery = .lagging }
                table[name] = subscription
                model[name] = subscription
            case 2:
                #expect(table.removeValue(forKey: name)?.version == model.removeValue(forKey: name)?.version)
            case 3:
                table[name] = nil
                model[name] = nil
            default:
                let from = random.next() % 4
                let withinLimit = random.next() % 5 != 0
                var expected: Subscription.Advance?
                if var subscription = model[name] {
                    expected = Self.advance(&subscription, from: from, to: from + 1, withinUnsentLimit: withinLimit)
                    model[name] = subscription
                }
                #expect(
                    table.advance(name, from: from, to: from + 1, withinUnsentLimit: withinLimit) == expected,
                    "step \(step)")
            }
            #expect(table.count == model.count && table.isEmpty == model.isEmpty, "step \(step)")
            #expect(Self.entries(of: table) == model.mapValues(\.version), "step \(step)")
            for name in names {
                #expect(table[name]?.version == model[name]?.version)
                #expect(table[name]?.delivery == model[name]?.delivery)
            }
        }
    }
}

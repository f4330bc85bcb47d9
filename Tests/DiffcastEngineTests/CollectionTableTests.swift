import DiffcastTestSupport
import Testing

@testable import DiffcastEngine

@Suite struct CollectionTableTests {
    /// Random puts, replacements and removals over a few hundred names, through several
    /// growths: after every step the table finds exactly what a `Dictionary` given the same
    /// steps holds, names it holds nothing for included, and lists the same collections.
    @Test func findsWhatADictionaryHolds() {
        var rng = SplitMix64(seed: 27)
        let names = (0..<300).map { "c\($0)" }
        var table = CollectionTable()
        var model: [String: CollectionState] = [:]
        for step in 0..<6_000 {
            let name = names[Int.random(in: 0..<(step < 3_000 ? 300 : 40), using: &rng)]
            switch Int.random(in: 0..<3, using: &rng) {
            case 0, 1:
                let state = CollectionState(name: name, epoch: "e\(step)")
                table[name] = state
                model[name] = state
            default:
                #expect(table.removeValue(forKey: name) === model.removeValue(forKey: name))
            }
            guard step % 50 == 0 || step > 5_900 else { continue }
            #expect(table.count == model.count)
            for name in names where table[name] !== model[name] {
                Issue.record(
                    "step \(step): \(name) is \(table[name]?.epoch ?? "absent"), not \(model[name]?.epoch ?? "absent")")
                return
            }
            #expect(Set(table.map(ObjectIdentifier.init)) == Set(model.values.map(ObjectIdentifier.init)))
        }
        #expect(model.count > 10)
    }

    /// Emptied with `nil` assignments, it finds nothing and lists nothing.
    @Test func anEmptiedTableHoldsNothing() {
        var table = CollectionTable()
        for index in 0..<100 { table["c\(index)"] = CollectionState(name: "c\(index)", epoch: "e") }
        #expect(table.count == 100)
        for index in 0..<100 { table["c\(index)"] = nil }
        #expect(table.count == 0)
        #expect(table.first { _ in true } == nil)
        #expect((0..<100).allSatisfy { table["c\($0)"] == nil })
    }
}

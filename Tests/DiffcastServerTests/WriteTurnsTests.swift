import DiffcastEngine
import DiffcastTestSupport
import Testing

@testable import DiffcastServer

/// The line of subscribers waiting for their turn, against a plain array that does what its
/// doc comment says: first come first served, one place per connection, a removed connection
/// out of the line (and at the back if it is queued again).
@Suite struct WriteTurnsTests {
    @Test func aConnectionWaitsInOnePlaceAndTurnsComeInOrder() {
        var turns = WriteTurns()
        for id: ConnectionID in [3, 1, 3, 2, 1] { turns.enqueue(id) }
        #expect(turns.count == 3)
        #expect(turns.next() == 3)
        turns.enqueue(3)
        #expect([turns.next(), turns.next(), turns.next(), turns.next()] == [1, 2, 3, nil])
        #expect(turns.isEmpty)
    }

    @Test func aRemovedConnectionQueuedAgainGoesToTheBack() {
        var turns = WriteTurns()
        for id: ConnectionID in [1, 2, 3] { turns.enqueue(id) }
        turns.remove(1)
        turns.enqueue(1)
        #expect([turns.next(), turns.next(), turns.next(), turns.next()] == [2, 3, 1, nil])
    }

    @Test(arguments: [7, 200]) func randomOperationsMatchThePlainLine(connections: Int) {
        var rng = SplitMix64(seed: UInt64(connections))
        var turns = WriteTurns()
        var model: [ConnectionID] = []
        for _ in 0..<50_000 {
            let id = ConnectionID(Int.random(in: 0..<connections, using: &rng))
            switch Int.random(in: 0..<10, using: &rng) {
            case 0..<5:
                turns.enqueue(id)
                if !model.contains(id) { model.append(id) }
            case 5..<7:
                turns.remove(id)
                model.removeAll { $0 == id }
            default:
                let expected = model.isEmpty ? nil : model.removeFirst()
                #expect(turns.next() == expected)
            }
            #expect(turns.count == model.count)
        }
        while let id = turns.next() { #expect(id == model.removeFirst()) }
        #expect(model.isEmpty)
    }
}

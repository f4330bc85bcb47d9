import DiffcastTestSupport
import Testing

@testable import DiffcastServer

/// The line of subscribers waiting for their turn, against a plain array that does what its
/// doc comment says: first come first served, one place per connection, a removed connection
/// out of the line (and at the back if it is queued again).
@Suite struct WriteTurnsTests {
    /// A connection as the line sees it.
    final class Taker: TurnTaking {
        let id: Int
        var turnPlace: Int?

        init(_ id: Int) {
            self.id = id
        }
    }

    /// The takers numbered 0..<count, so that a test names them by number.
    private static func takers(_ count: Int) -> [Taker] {
        (0..<count).map(Taker.init)
    }

    @Test func aConnectionWaitsInOnePlaceAndTurnsComeInOrder() {
        let taker = Self.takers(4)
        var turns = WriteTurns<Taker>()
        for id in [3, 1, 3, 2, 1] { turns.enqueue(taker[id]) }
        #expect(turns.count == 3)
        #expect(turns.next()?.id == 3)
        turns.enqueue(taker[3])
        #expect([turns.next()?.id, turns.next()?.id, turns.next()?.id, turns.next()?.id] == [1, 2, 3, nil])
        #expect(turns.isEmpty)
        #expect(taker.allSatisfy { $0.turnPlace == nil }, "a connection out of the line keeps no place")
    }

    @Test func aRemovedConnectionQueuedAgainGoesToTheBack() {
        let taker = Self.takers(4)
        var turns = WriteTurns<Taker>()
        for id in [1, 2, 3] { turns.enqueue(taker[id]) }
        turns.remove(taker[1])
        turns.remove(taker[1])
        #expect(turns.count == 2, "removing one that does not wait changes nothing")
        turns.enqueue(taker[1])
        #expect([turns.next()?.id, turns.next()?.id, turns.next()?.id, turns.next()?.id] == [2, 3, 1, nil])
    }

    @Test(arguments: [7, 200]) func randomOperationsMatchThePlainLine(connections: Int) {
        var rng = SplitMix64(seed: UInt64(connections))
        let taker = Self.takers(connections)
        var turns = WriteTurns<Taker>()
        var model: [Int] = []
        for _ in 0..<50_000 {
            let id = Int.random(in: 0..<connections, using: &rng)
            switch Int.random(in: 0..<10, using: &rng) {
            case 0..<5:
                turns.enqueue(taker[id])
                if !model.contains(id) { model.append(id) }
            case 5..<7:
                turns.remove(taker[id])
                model.removeAll { $0 == id }
            default:
                let expected = model.isEmpty ? nil : model.removeFirst()
                #expect(turns.next()?.id == expected)
            }
            #expect(turns.count == model.count)
        }
        while let next = turns.next() { #expect(next.id == model.removeFirst()) }
        #expect(model.isEmpty)
    }
}

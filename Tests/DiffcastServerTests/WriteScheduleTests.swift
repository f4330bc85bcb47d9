import DiffcastTestSupport
import Testing

@testable import DiffcastServer

/// The loop's write schedule against plain arrays that do what its doc comment says: marked
/// connections listed once each, in the order marked; a connection waits for one thing at a
/// time; lingering streams and the line of turns first come first served, one place per
/// connection; one that stops waiting leaves its list (and goes to the back if it waits again).
@Suite struct WriteScheduleTests {
    /// A connection as the schedule sees it.
    final class Writer: WriteScheduled {
        let id: Int
        var scheduled = WriteScheduleEntry()

        init(_ id: Int) {
            self.id = id
        }
    }

    /// The writers numbered 0..<count, so that a test names them by number.
    private static func writers(_ count: Int) -> [Writer] {
        (0..<count).map(Writer.init)
    }

    /// What the schedule should hold, in plain arrays.
    struct Model {
        var marked: [Int] = []
        var lingering: [Int] = []
        var line: [Int] = []

        mutating func stopWaiting(_ id: Int) {
            lingering.removeAll { $0 == id }
            line.removeAll { $0 == id }
        }
    }

    /// Debug builds check the counts after every change: a connection that claims a turn it was
    /// never given (its entry forged) stops the process when it stops waiting.
    @Test func aMiscountStopsADebugBuild() async {
        await #expect(processExitsWith: .failure) {
            let writer = Writer(0)
            var schedule = WriteSchedule<Writer>()
            var forged = WriteSchedule<Writer>()
            forged.waitTurn(writer)
            schedule.stopWaiting(writer)
        }
    }

    @Test func aConnectionWaitsInOnePlaceAndTurnsComeInOrder() {
        let writer = Self.writers(4)
        var schedule = WriteSchedule<Writer>()
        for id in [3, 1, 3, 2, 1] { schedule.waitTurn(writer[id]) }
        #expect(schedule.turnsWaiting == 3)
        #expect(schedule.nextTurn()?.id == 3)
        schedule.waitTurn(writer[3])
        let turns = [
            schedule.nextTurn()?.id, schedule.nextTurn()?.id, schedule.nextTurn()?.id, schedule.nextTurn()?.id,
        ]
        #expect(turns == [1, 2, 3, nil])
        #expect(schedule.turnsWaiting == 0)
        #expect(
            writer.allSatisfy { $0.scheduled == WriteScheduleEntry() }, "a connection out of the line keeps no place")
    }

    /// The line keeps each connection in it alive until its turn, stale entries included, and
    /// no longer: a turn taken hands the connection over, and a schedule that goes away lets go
    /// of those whose turn never came.
    @Test func theLineHoldsItsConnectionsUntilTheirTurnAndNoLonger() {
        weak var taken: Writer?
        weak var skipped: Writer?
        weak var stillWaiting: Writer?
        do {
            var schedule = WriteSchedule<Writer>()
            do {
                let writers = Self.writers(3)
                (taken, skipped, stillWaiting) = (writers[0], writers[1], writers[2])
                for writer in writers { schedule.waitTurn(writer) }
                // Written at once: its entry stays in the line, stale.
                schedule.writeNow(writers[1])
            }
            #expect(taken != nil && skipped != nil && stillWaiting != nil, "the line holds every entry")
            #expect(schedule.nextTurn()?.id == 0)
            #expect(taken == nil, "a turn taken is handed over, not kept")
            #expect(schedule.nextTurn()?.id == 2)
            #expect(skipped == nil, "a stale entry is let go as the line passes it")
            // Back in line, and the schedule goes away before its turn.
            let last = Writer(2)
            stillWaiting = last
            schedule.waitTurn(last)
        }
        #expect(stillWaiting == nil, "a schedule that goes away lets go of the line")
    }

    /// A line that is never emptied (a turn taken, another joins, a few always waiting) keeps
    /// its storage within a bound of the turns waiting, however many have passed through it.
    @Test func aLineNeverEmptiedStaysSmall() {
        let writer = Self.writers(10)
        var schedule = WriteSchedule<Writer>()
        for id in 0..<10 { schedule.waitTurn(writer[id]) }
        for step in 0..<100_000 {
            guard let taken = schedule.nextTurn() else {
                Issue.record("the line ran dry at step \(step)")
                return
            }
            schedule.waitTurn(taken)
            #expect(schedule.turnsWaiting == 10)
        }
        #expect(schedule.lineStorage <= 4 * 64, "\(schedule.lineStorage) entries of storage for 10 waiting")
    }

    @Test func aConnectionThatLingersLeavesTheLineAndIsFlushedOnce() {
        let writer = Self.writers(3)
        var schedule = WriteSchedule<Writer>()
        for id in [0, 1, 2] { schedule.waitTurn(writer[id]) }
        schedule.linger(writer[1])
        schedule.linger(writer[1])
        schedule.writeNow(writer[2])
        #expect((schedule.turnsWaiting, schedule.lingeringCount) == (1, 1))
        #expect(schedule.takeLingering().map(\.id) == [1])
        #expect(schedule.takeLingering().isEmpty, "a linger ends once")
        #expect([schedule.nextTurn()?.id, schedule.nextTurn()?.id] == [0, nil])
    }

    @Test func markedConnectionsAreListedOnceUntilTaken() {
        let writer = Self.writers(3)
        var schedule = WriteSchedule<Writer>()
        for id in [2, 0, 2, 0] { schedule.mark(writer[id]) }
        var batch: [Writer] = []
        schedule.takeMarked(into: &batch)
        #expect(batch.map(\.id) == [2, 0])
        let markedAfterTaking = schedule.hasMarked
        #expect(!markedAfterTaking)
        schedule.mark(writer[2])
        let markedAgain = schedule.hasMarked
        #expect(!markedAgain, "a connection marked and not yet decided is not listed again")
        schedule.skip(writer[2])
        schedule.mark(writer[2])
        let markedAfterSkip = schedule.hasMarked
        #expect(markedAfterSkip)
    }

    @Test(arguments: [7, 200]) func randomOperationsMatchThePlainLists(connections: Int) {
        var rng = SplitMix64(seed: UInt64(connections))
        let writer = Self.writers(connections)
        var schedule = WriteSchedule<Writer>()
        var model = Model()
        for _ in 0..<50_000 {
            let id = Int.random(in: 0..<connections, using: &rng)
            switch Int.random(in: 0..<20, using: &rng) {
            case 0..<6:
                schedule.mark(writer[id])
                if !model.marked.contains(id) { model.marked.append(id) }
            case 6..<8:
                // A flush: each marked connection decided at random.
                var batch: [Writer] = []
                schedule.takeMarked(into: &batch)
                #expect(batch.map(\.id) == model.marked)
                model.marked = []
                for taken in batch {
                    switch Int.random(in: 0..<4, using: &rng) {
                    case 0:
                        schedule.skip(taken)
                    case 1:
                        schedule.writeNow(taken)
                        model.stopWaiting(taken.id)
                    case 2:
                        schedule.linger(taken)
                        if !model.lingering.contains(taken.id) {
                            model.stopWaiting(taken.id)
                            model.lingering.append(taken.id)
                        }
                    default:
                        schedule.waitTurn(taken)
                        if !model.line.contains(taken.id) {
                            model.stopWaiting(taken.id)
                            model.line.append(taken.id)
                        }
                    }
                }
            case 8..<10:
                schedule.stopWaiting(writer[id])
                model.stopWaiting(id)
            case 10:
                #expect(schedule.takeLingering().map(\.id) == model.lingering)
                model.lingering = []
            default:
                let expected = model.line.isEmpty ? nil : model.line.removeFirst()
                #expect(schedule.nextTurn()?.id == expected)
            }
            #expect(schedule.turnsWaiting == model.line.count)
            #expect(schedule.lingeringCount == model.lingering.count)
            #expect(schedule.hasMarked == !model.marked.isEmpty)
        }
        while let next = schedule.nextTurn() { #expect(next.id == model.line.removeFirst()) }
        #expect(model.line.isEmpty)
    }
}

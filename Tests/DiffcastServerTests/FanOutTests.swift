import DiffcastCore
import DiffcastEngine
import DiffcastHTTP
import DiffcastTestSupport
import DiffcastWire
import Logging
import Testing

@testable import DiffcastServer

/// The fan-out with real connections and a real engine, and no socket: a fake loop stands in
/// for libuv (as swift-nio tests handlers in an `EmbeddedChannel`), and "writing" a connection
/// takes what it queued. What subscribers receive is followed by a `StrictMirror` (the tests'
/// own applier, move law and digest, checking every version) and compared with the engine's
/// own `get`.
@Suite struct FanOutTests {
    /// The loop's side: connections by id, the jobs handed to the apply queue, and a connection's
    /// queued bytes taken as the kernel would take them.
    final class FakeLoop: FanOutHost {
        var connections: [ConnectionID: Connection] = [:]
        var submitted: [Job] = []
        var stoppedReading: [ConnectionID] = []
        /// The bytes each connection held queued when the fan-out last said it has something to
        /// write (`needsWrite`). The loop decides when a connection's bytes go out at that call
        /// (an answer at once, events in their turn), so every delivery must end with each
        /// connection announced after the last bytes it queued: an answer queued after its
        /// announcement would wait for the events' turn, or, with none, for an unrelated write.
        var announced: [ConnectionID: Int] = [:]
        /// Whether the loop sends a version's event at once to a subscriber with nothing queued
        /// (as the server's does for a batch applied on the loop), rather than have it queued.
        let sendsAtOnce: Bool
        /// What each connection was sent at once, not yet taken by `written`.
        var sentAtOnce: [ConnectionID: [UInt8]] = [:]
        let engine = ApplyEngine(historyLimits: HistoryLimits(versions: 64, items: 10_000))
        let policy: FanOut.Policy
        lazy var fanOut = FanOut(policy: policy, host: self, logger: Logger(label: "fan-out-test"))

        init(
            maximumUnsentBytes: Int = 1 << 20, slowSubscribers: ServerConfiguration.SlowSubscriberPolicy = .catchUp,
            sendsAtOnce: Bool = false
        ) {
            policy = FanOut.Policy(unsentBytes: WaterMarks(high: maximumUnsentBytes), slowSubscribers: slowSubscribers)
            self.sendsAtOnce = sendsAtOnce
        }

        func connection(_ id: ConnectionID) -> Connection? { connections[id] }
        func submit(_ job: Job) { submitted.append(job) }
        func sendAtOnce(_ bytes: SharedBytes, to connection: Connection) -> Bool {
            guard sendsAtOnce, connection.pending.isEmpty else { return false }
            sentAtOnce[connection.id, default: []] += bytes.bytes
            return true
        }
        func needsWrite(_ connection: Connection) { announced[connection.id] = connection.pending.queuedBytes }
        func stopReading(_ connection: Connection) {
            stoppedReading.append(connection.id)
            connection.finish()
        }

        func open(_ id: ConnectionID) -> Connection {
            let connection = Connection(
                id: id, handle: UnsafeMutableRawPointer.allocate(byteCount: 8, alignment: 8), maximumLineBytes: 1 << 20,
                endpoint: .socket)
            connections[id] = connection
            return connection
        }

        /// Runs request lines of one connection through the engine and delivers the outcomes.
        func send(_ lines: [String], on connection: Connection) throws {
            let jobs = try lines.map { line in
                Job.request(
                    try RequestParser().parse(line: Array(line.utf8)),
                    ResponseAddress(connection: connection.id, slot: connection.reserveSlot()))
            }
            run(jobs)
        }

        /// Runs jobs (and the jobs the fan-out submits meanwhile) and delivers the outcomes.
        func run(_ jobs: [Job]) {
            for outcome in engine.process(jobs) { deliver(outcome) }
        }

        /// Delivers one outcome, and checks that every connection holding queued bytes was
        /// announced after the last of them (`announced`).
        func deliver(_ outcome: Outcome) {
            fanOut.deliver(outcome)
            for (id, connection) in connections where connection.hasOutbound {
                #expect(
                    announced[id] == connection.pending.queuedBytes,
                    "connection \(id) queued bytes after the loop was last told to write it")
            }
        }

        /// Runs what the fan-out handed to the apply queue.
        func runSubmitted() {
            let jobs = submitted
            submitted = []
            run(jobs)
        }

        /// Everything queued for a connection as lines, taken as if the kernel took it all.
        func written(_ connection: Connection) -> [String] {
            announced[connection.id] = nil
            let chunks = connection.pending.take(limit: 100_000)
            connection.pending.writeFinished(bytes: chunks.reduce(0) { $0 + $1.count })
            let sent = sentAtOnce.removeValue(forKey: connection.id) ?? []
            let text = String(decoding: sent + chunks.flatMap(\.bytes), as: UTF8.self)
            return text.split(separator: "\n").map(String.init)
        }
    }

    private static func isEvent(_ line: String) -> Bool { line.hasPrefix("{\"event\"") }

    /// A connection finds its subscription by name, whether it follows one collection (the
    /// name compared, not hashed) or several (looked up), and none for a name it does not
    /// follow.
    @Test func aSubscriptionIsFoundByItsNameWithOneOrSeveral() {
        let connection = FakeLoop().open(1)
        connection.subscriptions["a"] = Subscription(version: 3)
        #expect(connection.subscriptions.advance("b", from: 3, to: 4, withinUnsentLimit: true) == nil)
        #expect(connection.subscriptions["a"]?.version == 3)
        #expect(connection.subscriptions.advance("a", from: 3, to: 4, withinUnsentLimit: true) == .advanced)
        #expect(connection.subscriptions["a"]?.version == 4)
        connection.subscriptions["b"] = Subscription(version: 7)
        #expect(connection.subscriptions.advance("c", from: 4, to: 5, withinUnsentLimit: true) == nil)
        #expect(connection.subscriptions.advance("a", from: 3, to: 5, withinUnsentLimit: true) == .behind)
        #expect(connection.subscriptions.advance("b", from: 7, to: 8, withinUnsentLimit: true) == .advanced)
        #expect(connection.subscriptions["a"]?.version == 4 && connection.subscriptions["b"]?.version == 8)
    }

    /// Feeds a subscriber's event lines to its mirror; returns its answers.
    private static func follow(_ lines: [String], into mirror: inout StrictMirror) throws -> [String] {
        var answers: [String] = []
        for line in lines {
            if isEvent(line) {
                try mirror.feed(try JSONParser.parse(Array(line.utf8)))
            } else {
                answers.append(line)
            }
        }
        return answers
    }

    private static func heldByEngine(_ loop: FakeLoop, _ name: String) throws -> [SectionOutline] {
        let reader = loop.open(999)
        try loop.send(["get \(name)"], on: reader)
        loop.connections[999] = nil
        let answer = try JSONParser.parse(Array(try #require(loop.written(reader).first).utf8))
        return try EventDecoder.outline(answer["sections"])
    }

    @Test(arguments: [false, true]) func everySubscriberThatHoldsAVersionGetsTheNext(sendsAtOnce: Bool) throws {
        let loop = FakeLoop(sendsAtOnce: sendsAtOnce)
        let first = loop.open(1)
        let second = loop.open(2)
        let writer = loop.open(3)
        try loop.send([#"append_sections c {"sections":[{"id":"s","items":["a"]}]}"#], on: writer)
        try loop.send(["subscribe c"], on: first)
        try loop.send(["subscribe c"], on: second)
        try loop.send(
            [
                #"append_items c {"items":["b","c"]}"#, #"move_item c {"item":"c","before":"a"}"#,
                #"update_items c {"items":[{"id":"a","data":1}]}"#,
            ], on: writer)
        try loop.send([#"delete_items c {"items":["b"]}"#], on: writer)
        let held = try Self.heldByEngine(loop, "c")
        for subscriber in [first, second] {
            var mirror = StrictMirror()
            let answers = try Self.follow(loop.written(subscriber), into: &mirror)
            #expect(answers.count == 1 && answers[0].contains(#""op":"subscribe""#))
            #expect(mirror.sections == held)
            #expect(mirror.version == 3 && mirror.snapshotsApplied == 1 && mirror.changesetsApplied == 2)
        }
        #expect(loop.written(writer).count == 5)
        #expect(loop.fanOut.subscriberCount(of: "c") == 2 && loop.fanOut.counters.eventsQueued == 6)
    }

    /// Read your writes: a write's answer leaves only after the event of its version, even when
    /// the answer is delivered first.
    @Test(arguments: [false, true]) func aWritersAnswerWaitsForTheEventOfItsVersion(sendsAtOnce: Bool) throws {
        let loop = FakeLoop(sendsAtOnce: sendsAtOnce)
        let connection = loop.open(1)
        try loop.send([#"append_sections c {"sections":[{"id":"s"}]}"#, "subscribe c"], on: connection)
        _ = loop.written(connection)
        let slot = connection.reserveSlot()
        let outcomes = loop.engine.process([
            .request(
                try RequestParser().parse(line: Array(#"append_items c {"items":["x"]}"#.utf8)),
                ResponseAddress(connection: 1, slot: slot))
        ])
        let acknowledgements = outcomes.filter { if case .acknowledged = $0 { true } else { false } }
        let rest = outcomes.filter { if case .acknowledged = $0 { false } else { true } }
        #expect(acknowledgements.count == 1 && rest.count == 1)
        for outcome in acknowledgements { loop.deliver(outcome) }
        #expect(loop.written(connection).isEmpty, "the answer left before the event of its version")
        for outcome in rest { loop.deliver(outcome) }
        let lines = loop.written(connection)
        #expect(lines.count == 2 && Self.isEvent(lines[0]) && lines[1].contains(#""version":2"#))
    }

    /// A pipelining writer's answers come one line per request, in request order, whether they
    /// were answered in runs or one by one, in turn or not; and after the event of their version.
    @Test(arguments: [false, true]) func pipelinedWritesAreAnsweredLineByLineInOrder(sendsAtOnce: Bool) throws {
        let loop = FakeLoop(sendsAtOnce: sendsAtOnce)
        let connection = loop.open(1)
        try loop.send([#"append_sections c {"sections":[{"id":"s"}]}"#, "subscribe c"], on: connection)
        _ = loop.written(connection)
        try loop.send(
            [
                #"append_items c {"items":["a"]}"#, #"append_items c {"items":["b"]}"#, "ping",
                #"append_items c {"items":["c"]}"#, #"append_items c {"items":["d"]}"#,
                #"append_items c {"items":["e"]}"#, #"{"op":"append_items","collection":"c","id":1,"items":["f"]}"#,
            ], on: connection)
        let lines = loop.written(connection)
        #expect(lines.count == 8 && Self.isEvent(lines[0]), "\(lines)")
        let answers = lines.dropFirst().map { try? JSONParser.parse(Array($0.utf8)) }
        #expect(
            answers.map { $0?["op"] } == ["append_items", "append_items", "ping"].map(JSONValue.string)
                + Array(repeating: .string("append_items"), count: 4))
        #expect(
            answers.map { $0?["version"] } == [
                .number("2"), .number("2"), nil, .number("2"), .number("2"), .number("2"), .number("2"),
            ])
        #expect(answers.last??["id"] == .number("1"))
    }

    /// A subscriber over its limit skips versions while the others go on; once it drains it is
    /// caught up with one changeset to the version now held.
    @Test func aSlowSubscriberIsCaughtUpWithoutHoldingUpTheOthers() throws {
        let loop = FakeLoop(maximumUnsentBytes: 600)
        let slow = loop.open(1)
        let quick = loop.open(2)
        let writer = loop.open(3)
        try loop.send([#"append_sections c {"sections":[{"id":"s"}]}"#], on: writer)
        try loop.send(["subscribe c"], on: slow)
        try loop.send(["subscribe c"], on: quick)
        var slowMirror = StrictMirror()
        var quickMirror = StrictMirror()
        _ = try Self.follow(loop.written(slow), into: &slowMirror)
        for index in 0..<20 {
            try loop.send(
                [#"append_items c {"items":[{"id":"i\#(index)","data":"\#(String(repeating: "x", count: 40))"}]}"#],
                on: writer)
            _ = try Self.follow(loop.written(quick), into: &quickMirror)
        }
        #expect(quickMirror.version == 21)
        #expect(slow.subscriptions["c"]?.delivery == .lagging)
        #expect(loop.submitted.isEmpty, "a catch-up was asked for before the subscriber drained")
        let queued = loop.written(slow)
        #expect(queued.count < 20, "events were queued past the limit")
        _ = try Self.follow(queued, into: &slowMirror)
        let held = try #require(slowMirror.version)
        loop.fanOut.requestCatchUpsIfDrained(slow)
        guard case .catchUp(1, "c", let since, nil) = try #require(loop.submitted.first) else {
            Issue.record("no catch-up asked for: \(loop.submitted)")
            return
        }
        #expect(since == held && slow.subscriptions["c"]?.delivery == .catchingUp)
        loop.runSubmitted()
        let caughtUp = loop.written(slow)
        #expect(caughtUp.count == 1 && caughtUp[0].contains(#""event":"changeset""#))
        _ = try Self.follow(caughtUp, into: &slowMirror)
        #expect(slowMirror.version == 21 && slowMirror.sections == quickMirror.sections)
        #expect(slow.subscriptions["c"]?.delivery == .current && loop.fanOut.counters.catchUps == 1)
    }

    /// A catch-up made before later versions were published reaches the loop after them: the
    /// versions it skipped while catching up are brought by one more catch-up, not lost.
    @Test func aCatchUpOvertakenByLaterVersionsIsFollowedByAnother() throws {
        let loop = FakeLoop(maximumUnsentBytes: 600)
        let slow = loop.open(1)
        let writer = loop.open(3)
        try loop.send([#"append_sections c {"sections":[{"id":"s"}]}"#], on: writer)
        try loop.send(["subscribe c"], on: slow)
        var slowMirror = StrictMirror()
        _ = try Self.follow(loop.written(slow), into: &slowMirror)
        let item = { (index: Int) in
            #"append_items c {"items":[{"id":"i\#(index)","data":"\#(String(repeating: "x", count: 40))"}]}"#
        }
        for index in 0..<20 { try loop.send([item(index)], on: writer) }
        _ = try Self.follow(loop.written(slow), into: &slowMirror)
        loop.fanOut.requestCatchUpsIfDrained(slow)
        // The apply queue makes the catch-up (to version 21) ...
        let catchUp = loop.engine.process(loop.submitted)
        loop.submitted = []
        // ... but version 22 (two writes, coalesced) reaches the loop before it does.
        try loop.send([item(20), item(21)], on: writer)
        #expect(slow.subscriptions["c"]?.delivery == .catchingUp)
        for outcome in catchUp { loop.deliver(outcome) }
        #expect(slow.subscriptions["c"]?.delivery == .lagging, "behind again")
        _ = try Self.follow(loop.written(slow), into: &slowMirror)
        #expect(slowMirror.version == 21)
        // Drained (the loop asks whenever a write completes): the second catch-up.
        loop.fanOut.requestCatchUpsIfDrained(slow)
        guard case .catchUp(1, "c", 21, nil) = try #require(loop.submitted.first) else {
            Issue.record("no second catch-up: \(loop.submitted)")
            return
        }
        loop.runSubmitted()
        _ = try Self.follow(loop.written(slow), into: &slowMirror)
        #expect(slowMirror.version == 22 && slow.subscriptions["c"]?.delivery == .current)
        #expect(slowMirror.sections.flatMap(\.items).count == 22)
    }

    @Test func aSlowSubscriberIsDisconnectedWhenThePolicySaysSo() throws {
        let loop = FakeLoop(maximumUnsentBytes: 300, slowSubscribers: .disconnect)
        let slow = loop.open(1)
        let writer = loop.open(2)
        try loop.send([#"append_sections c {"sections":[{"id":"s"}]}"#, "subscribe c"], on: slow)
        for index in 0..<10 {
            try loop.send(
                [#"append_items c {"items":[{"id":"i\#(index)","data":"\#(String(repeating: "x", count: 40))"}]}"#],
                on: writer)
        }
        #expect(loop.stoppedReading == [1] && slow.isFinishing)
        #expect(slow.subscriptions.isEmpty && loop.fanOut.subscriberCount(of: "c") == 0)
        let lines = loop.written(slow)
        #expect(lines.count == 1 && lines[0].contains(#""code":"limit_exceeded""#))
        #expect(loop.fanOut.counters.slowDisconnects == 1)
    }

    @Test(arguments: [false, true]) func aDroppedCollectionEndsItsSubscriptions(sendsAtOnce: Bool) throws {
        let loop = FakeLoop(sendsAtOnce: sendsAtOnce)
        let subscriber = loop.open(1)
        try loop.send([#"append_sections c {"sections":[{"id":"s"}]}"#, "subscribe c"], on: subscriber)
        _ = loop.written(subscriber)
        try loop.send(["drop c"], on: loop.open(2))
        #expect(loop.written(subscriber) == [#"{"event":"dropped","collection":"c"}"#])
        #expect(subscriber.subscriptions.isEmpty && loop.fanOut.subscriptionCount == 0)
    }

    /// A connection's phases: backpressure pauses and resumes reading; once finishing it stays
    /// so; closing takes nothing more.
    /// A stream's events may wait for the linger flush; an answer never does, and neither does
    /// anything queued with it.
    @Test func onlyAStreamsEventsLinger() throws {
        let loop = FakeLoop()
        let writer = loop.open(1)
        let lines = loop.open(2)
        let webSocket = loop.open(3)
        webSocket.transport = .webSocket(WebSocketCodec(maximumMessageBytes: 1 << 20))
        let eventStream = loop.open(4)
        eventStream.transport = .eventStream
        try loop.send([#"append_sections c {"sections":[{"id":"s","items":["a"]}]}"#], on: writer)
        for subscriber in [lines, webSocket, eventStream] {
            try loop.send(["subscribe c"], on: subscriber)
        }
        #expect(!lines.mayLinger && !webSocket.mayLinger)
        #expect(eventStream.mayLinger, "an event stream's subscribe queues no answer")
        _ = [lines, webSocket, eventStream].map(loop.written)
        try loop.send([#"append_items c {"items":["b"]}"#], on: writer)
        #expect(webSocket.hasOutbound && webSocket.mayLinger)
        #expect(eventStream.hasOutbound && eventStream.mayLinger)
        #expect(lines.hasOutbound && !lines.mayLinger, "the socket transport writes at once")
        try loop.send(["get c"], on: webSocket)
        #expect(!webSocket.mayLinger, "an answer is queued behind the event")
        _ = loop.written(webSocket)
        #expect(webSocket.mayLinger)
    }

    @Test func aConnectionMovesThroughItsPhasesOneWay() throws {
        let loop = FakeLoop()
        let connection = loop.open(1)
        #expect(connection.phase == .reading)
        connection.pauseReading()
        #expect(connection.phase == .paused && connection.isReadingPaused)
        connection.resumeReading()
        #expect(connection.phase == .reading)
        connection.pauseReading()
        connection.finish()
        #expect(connection.phase == .finishing && connection.isFinishing)
        connection.resumeReading()
        connection.pauseReading()
        #expect(connection.phase == .finishing)
        connection.markClosing()
        connection.enqueue(SharedBytes(Array("late\n".utf8)))
        connection.finish()
        #expect(connection.phase == .closing && !connection.hasOutbound)
    }
}

import DiffcastCore
import DiffcastTestSupport
import DiffcastWire
import Testing

@testable import DiffcastEngine

@Suite struct ApplyEngineTests {
    private func job(_ line: String, connection: ConnectionID = 1, slot: UInt64) throws -> Job {
        .request(try RequestParser().parse(line: Array(line.utf8)), ResponseAddress(connection: connection, slot: slot))
    }

    private func text(_ bytes: SharedBytes) -> String {
        String(decoding: UnsafeRawBufferPointer(start: bytes.pointer, count: bytes.count), as: UTF8.self)
    }

    /// The line an outcome's response or event goes out as.
    private func text<Value>(_ encoded: Encoded<Value>?) -> String {
        encoded.map { text($0.bytes) } ?? ""
    }

    @Test func writesThatArriveTogetherArePublishedAsOneVersion() throws {
        let engine = ApplyEngine()
        let outcomes = engine.process([
            try job(#"append_sections c {"sections":[{"id":"s"}]}"#, slot: 0),
            try job(#"append_items c {"items":["a"]}"#, slot: 1),
            try job(#"append_items c {"items":["a"]}"#, slot: 2),
            try job(#"append_items c {"items":["b"]}"#, slot: 3),
        ])
        var published: [(UInt64, UInt64)] = []
        var responses: [Response] = []
        for outcome in outcomes {
            switch outcome {
            case .published(_, let from, let to, _, _): published.append((from, to))
            case .response(_, let response): responses.append(response.value)
            case .acknowledged(_, let response, _, let writes):
                responses += repeatElement(response.value, count: writes)
            default: Issue.record("unexpected outcome \(outcome)")
            }
        }
        #expect(published.count == 1 && published.first! == (0, 1))
        // The refusal is answered at once; the writes when their version is published.
        #expect(responses.map(\.version) == [nil, 1, 1, 1])
        #expect(responses.map(\.isSuccess) == [false, true, true, true])
        guard case .failure(.duplicateIdentifier(.item, let id)) = responses[0].result else {
            Issue.record("the repeated item is not refused as a duplicate: \(responses[0])")
            return
        }
        #expect(id.text == "a")
    }

    /// The writes of one version share one encoded answer only where the answers are the same:
    /// each keeps its own `id` and `op`.
    @Test func writesOfOneVersionAreEachAnsweredWithTheirOwnIDAndOp() throws {
        let engine = ApplyEngine()
        let outcomes = engine.process([
            try job(#"append_sections c {"sections":[{"id":"s"}]}"#, slot: 0),
            try job(#"append_items c {"items":["a"]}"#, slot: 1),
            try job(#"{"op":"append_items","collection":"c","id":"x","items":["b"]}"#, slot: 2),
            try job(#"{"op":"append_items","collection":"c","id":7,"items":["c"]}"#, slot: 3),
            try job(#"append_items c {"items":["d"]}"#, slot: 4),
            try job(#"update_items c {"items":[{"id":"d","data":1}]}"#, slot: 5),
        ])
        let encoded = outcomes.flatMap { outcome -> [Encoded<Response>] in
            guard case .acknowledged(_, let response, _, let writes) = outcome else { return [] }
            return Array(repeating: response, count: writes)
        }
        let answers = encoded.map(\.value)
        #expect(answers.map { $0.id?.text } == [nil, nil, "\"x\"", "7", nil, nil])
        #expect(
            answers.map(\.op) == [
                "append_sections", "append_items", "append_items", "append_items", "append_items", "update_items",
            ])
        #expect(answers.allSatisfy { $0.version == 1 })
        // What goes on the wire says the same as the value: each line is its own answer's.
        let lines = try encoded.map { try JSONParser.parse(Array(text($0).utf8.dropLast())) }
        #expect(lines.map { $0["id"] } == [nil, nil, .string("x"), .number("7"), nil, nil])
        #expect(lines.map { $0["op"] } == answers.map { $0.op.map(JSONValue.string) })
    }

    /// Id-less writes of one op that a connection sent one after the other are answered as one
    /// run; another connection, an `id`, a gap in the slots or another op starts a new one.
    @Test func pipelinedWritesOfOneVersionAreAnsweredInRuns() throws {
        let engine = ApplyEngine()
        let outcomes = engine.process([
            try job(#"append_sections c {"sections":[{"id":"s"}]}"#, slot: 0),
            try job(#"append_items c {"items":["a"]}"#, slot: 1),
            try job(#"append_items c {"items":["b"]}"#, slot: 2),
            try job(#"append_items c {"items":["c"]}"#, connection: 2, slot: 0),
            try job(#"append_items c {"items":["d"]}"#, slot: 3),
            try job(#"{"op":"append_items","collection":"c","id":"x","items":["e"]}"#, slot: 4),
            try job(#"append_items c {"items":["f"]}"#, slot: 5),
            try job(#"append_items c {"items":["g"]}"#, slot: 6),
            try job(#"append_items c {"items":["h"]}"#, slot: 8),
            try job(#"update_items c {"items":[{"id":"h","data":1}]}"#, slot: 9),
        ])
        let runs = outcomes.compactMap { outcome -> [String]? in
            guard case .acknowledged(let address, let response, let mark, let writes) = outcome else { return nil }
            #expect(mark.version == 1 && response.value.version == 1)
            return ["\(address.connection)", "\(address.slot)", "\(writes)", response.value.op ?? ""]
        }
        #expect(
            runs == [
                ["1", "0", "1", "append_sections"], ["1", "1", "2", "append_items"], ["2", "0", "1", "append_items"],
                ["1", "3", "1", "append_items"], ["1", "4", "1", "append_items"], ["1", "5", "2", "append_items"],
                ["1", "8", "1", "append_items"], ["1", "9", "1", "update_items"],
            ])
    }

    @Test func aReadAfterAWriteSeesItsVersion() throws {
        let engine = ApplyEngine()
        let outcomes = engine.process([
            try job(#"append_sections c {"sections":[{"id":"s"}]}"#, slot: 0),
            try job("get c", slot: 1),
            try job(#"append_sections c {"sections":[{"id":"t"}]}"#, slot: 2),
        ])
        let answers = outcomes.flatMap { outcome -> [Answer] in
            switch outcome {
            case .response(_, let response): [try? response.value.result.get()].compactMap { $0 }
            case .acknowledged(_, let response, _, let writes):
                Array(repeating: try? response.value.result.get(), count: writes).compactMap { $0 }
            default: []
            }
        }
        guard answers.count == 3, case .state(_, _, let version, let snapshot, nil) = answers[1] else {
            Issue.record("no state answered to get: \(answers)")
            return
        }
        #expect(version == 1 && snapshot.outline == [SectionOutline(id: "s")])
        #expect(
            answers.map { answer -> UInt64? in if case .version(let version) = answer { version } else { nil } } == [
                1, nil, 2,
            ])
    }

    /// Batches open on three collections; a read publishes the first one's early, and the
    /// writes after it still land in the batches of their own collections.
    @Test func aBatchPublishedEarlyLeavesTheOthersOpen() throws {
        let engine = ApplyEngine()
        let outcomes = engine.process([
            try job(#"append_sections a {"sections":[{"id":"s"}]}"#, slot: 0),
            try job(#"append_sections b {"sections":[{"id":"s"}]}"#, slot: 1),
            try job(#"append_sections c {"sections":[{"id":"s"}]}"#, slot: 2),
            try job("get a", slot: 3),
            try job(#"append_items c {"items":["x"]}"#, slot: 4),
            try job(#"append_items b {"items":["y"]}"#, slot: 5),
        ])
        let published = outcomes.compactMap { outcome -> String? in
            guard case .published(let name, let from, let to, _, _) = outcome else { return nil }
            return "\(name) \(from)→\(to)"
        }
        #expect(published == ["a 0→1", "b 0→1", "c 0→1"])
        let versions = outcomes.compactMap { outcome -> String? in
            guard case .acknowledged(let address, _, let mark, let writes) = outcome else { return nil }
            return "\(address.slot) \(mark.collection)@\(mark.version)×\(writes)"
        }
        #expect(versions == ["0 a@1×1", "1 b@1×1", "5 b@1×1", "2 c@1×1", "4 c@1×1"])
        for name in ["b", "c"] {
            #expect(engine.collections[name]?.document.itemCount == 1)
        }
    }

    @Test func aRejectedFirstWriteLeavesNoCollection() throws {
        let engine = ApplyEngine()
        _ = engine.process([try job(#"append_items ghost {"items":["a"]}"#, slot: 0)])
        let outcomes = engine.process([try job("get ghost", slot: 1)])
        guard case .response(_, let response) = outcomes.first else {
            Issue.record("no response")
            return
        }
        guard case .failure(.unknownCollection("ghost")) = response.value.result else {
            Issue.record("not refused as an unknown collection: \(response.value)")
            return
        }
    }

    /// A write that fails on a collection that does not exist says so (a mistyped name is the
    /// likely cause); the same failure on one that exists does not, and the code is the same.
    @Test func aFailedWriteToAMissingCollectionSaysItIsMissing() throws {
        let engine = ApplyEngine()
        _ = engine.process([try job(#"append_sections feed {"sections":[{"id":"s","items":["t1"]}]}"#, slot: 0)])
        let answers = engine.process([
            try job(#"update_items fed {"items":[{"id":"t1","data":1}]}"#, slot: 1),
            try job(#"update_items feed {"items":[{"id":"t2","data":1}]}"#, slot: 2),
        ]).compactMap { outcome -> String? in
            if case .response(_, let response) = outcome { text(response) } else { nil }
        }
        #expect(
            answers == [
                #"{"ok":false,"op":"update_items","error":{"code":"unknown_item","message":"unknown item 't1' (collection 'fed' does not exist: is its name mistyped?)"}}"#
                    + "\n",
                #"{"ok":false,"op":"update_items","error":{"code":"unknown_item","message":"unknown item 't2'"}}"#
                    + "\n",
            ])
    }

    @Test func catchUpIsOneChangesetFromTheVersionHeld() throws {
        let engine = ApplyEngine(historyLimits: HistoryLimits(versions: 4, items: 100))
        for index in 0..<3 {
            _ = engine.process([try job(#"append_sections c {"sections":[{"id":"s\#(index)"}]}"#, slot: UInt64(index))])
        }
        guard
            case .caughtUp(_, _, let version, let event, _) = engine.process([
                .catchUp(connection: 1, collection: "c", since: 1)
            ]).first
        else {
            Issue.record("no catch-up")
            return
        }
        #expect(version == 3)
        #expect(text(event).contains("\"event\":\"changeset\"") && text(event).contains("\"from\":1"))
        for index in 3..<10 {
            _ = engine.process([try job(#"append_sections c {"sections":[{"id":"s\#(index)"}]}"#, slot: UInt64(index))])
        }
        guard
            case .caughtUp(_, _, _, let old, _) = engine.process([.catchUp(connection: 1, collection: "c", since: 1)])
                .first
        else {
            Issue.record("no catch-up")
            return
        }
        #expect(text(old).contains("\"event\":\"snapshot\""))
    }

    /// The item limit counts the items of the snapshots kept, as versions come and go: 100
    /// items a version and a limit of 1,000 keep the last ten versions, however many passed.
    @Test func historyKeepsAsManyVersionsAsItsItemLimitHolds() throws {
        let engine = ApplyEngine(historyLimits: HistoryLimits(versions: 64, items: 1000))
        let items = (0..<100).map { #""i\#($0)""# }.joined(separator: ",")
        _ = engine.process([try job(#"append_sections c {"sections":[{"id":"s","items":[\#(items)]}]}"#, slot: 0)])
        for step in 1...30 {
            _ = engine.process([
                try job(#"update_items c {"items":[{"id":"i\#(step)","data":\#(step)}]}"#, slot: UInt64(step))
            ])
        }
        func catchUp(since: UInt64) -> String? {
            guard
                case .caughtUp(_, _, let version, let event, _) = engine.process([
                    .catchUp(connection: 1, collection: "c", since: since)
                ]).first, version == 31
            else { return nil }
            return text(event)
        }
        #expect(catchUp(since: 22)?.contains(#""event":"changeset""#) == true)
        #expect(catchUp(since: 20)?.contains(#""event":"snapshot""#) == true)
    }

    /// Catch-ups over random histories: from every version the limits keep (the last
    /// `versions`, as many as `items` summed over them allow, the current one always, the empty
    /// version 0 of a new collection among them), one changeset that takes the state held then
    /// to the state now (apply∘diff); from any older version, a snapshot. A version once dropped
    /// stays dropped, so the oldest kept only moves forward.
    @Test(arguments: [(3, 1000), (6, 40), (64, 25)])
    func catchUpsComeFromExactlyTheVersionsTheLimitsKeep(versions: Int, items: Int) throws {
        let engine = ApplyEngine(historyLimits: HistoryLimits(versions: versions, items: items))
        var rng = SplitMix64(seed: UInt64(versions * 1009 + items))
        var states = [Snapshot()]
        var oldestKept = 0
        var sections: [String] = []
        var checked = (changesets: 0, snapshots: 0)
        for step in 1...40 {
            if Bool.random(using: &rng), let section = sections.randomElement(using: &rng) {
                sections.removeAll { $0 == section }
                _ = engine.process([try job(#"delete_sections c {"sections":["\#(section)"]}"#, slot: UInt64(step))])
            } else {
                let count = Int.random(in: 0...6, using: &rng)
                let ids = (0..<count).map { #""i\#(step)-\#($0)""# }.joined(separator: ",")
                sections.append("s\(step)")
                let line = #"append_sections c {"sections":[{"id":"s\#(step)","items":[\#(ids)]}]}"#
                _ = engine.process([try job(line, slot: UInt64(step))])
            }
            let state = try #require(engine.collections["c"])
            #expect(state.version == UInt64(step))
            states.append(state.document.snapshot)
            // The oldest version a fresh look at the limits would keep, and the kept one never moves back.
            var oldest = step
            var total = states[step].itemCount
            while step - oldest + 1 < versions, oldest > 0, total + states[oldest - 1].itemCount <= items {
                oldest -= 1
                total += states[oldest].itemCount
            }
            oldestKept = max(oldestKept, oldest)
            for since in 0..<step {
                let outcome = engine.process([.catchUp(connection: 1, collection: "c", since: UInt64(since))]).first
                guard case .caughtUp(_, _, _, let event, _) = outcome, let event = event?.value else {
                    Issue.record("step \(step): no catch-up from \(since)")
                    continue
                }
                switch event {
                case .changeset(_, _, let from, let version, let changeset, _, _):
                    #expect(since >= oldestKept, "step \(step): a changeset from \(since), which was dropped")
                    #expect(from == UInt64(since) && version == UInt64(step))
                    #expect(try changeset.apply(to: states[since]).outline == states[step].outline, "step \(step)")
                    checked.changesets += 1
                case .snapshot(_, _, let version, let snapshot, _):
                    #expect(since < oldestKept, "step \(step): a snapshot from \(since), which is kept")
                    #expect(version == UInt64(step) && snapshot.outline == states[step].outline)
                    checked.snapshots += 1
                case .dropped:
                    Issue.record("step \(step): dropped")
                }
            }
        }
        #expect(checked.changesets > 40 && checked.snapshots > 40, "\(checked)")
    }

    // MARK: - Windows

    private func windowEvents(_ outcomes: [Outcome]) -> [WindowDelivery] {
        outcomes.flatMap { outcome -> [WindowDelivery] in
            if case .published(_, _, _, _, let windows) = outcome { return windows }
            return []
        }
    }

    /// A thousand subscribers of one window are one group: a version inside it is one encoded
    /// event, a version outside it none; each subscriber's own `from` is spliced in.
    @Test func subscribersOfOneWindowShareOneComputationAndOneEvent() throws {
        let engine = ApplyEngine()
        _ = engine.process([try job(#"apply c {"sections":[{"id":"s","items":["a","b","c"]}]}"#, slot: 0)])
        var groups = Set<WindowGroupID>()
        for connection in 2..<1002 {
            let outcomes = engine.process([
                try job(#"subscribe c {"window":{"first":2}}"#, connection: ConnectionID(connection), slot: 0)
            ])
            for case .subscribed(_, _, let version, let event?, _, let window?) in outcomes {
                groups.insert(window.group)
                #expect(version == 1 && window.range == WindowRange(lower: 0, upper: 2, total: 3))
                #expect(text(event).contains(#""window":{"offset":0,"count":2,"total":3}"#))
            }
        }
        #expect(groups.count == 1)
        #expect(windowEvents(engine.process([try job(#"append_items c {"items":["d"]}"#, slot: 1)])).isEmpty)
        let inside = windowEvents(engine.process([try job(#"insert_items c {"before":"a","items":["z"]}"#, slot: 2)]))
        #expect(inside.count == 1 && inside.first?.group == groups.first)
        let line = try #require(inside.first).event.bytes(from: 1)
        let event = try JSONParser.parse(Array(String(decoding: line, as: UTF8.self).utf8.dropLast()))
        #expect(event["from"] == .number("1") && event["version"] == .number("3"))
        #expect(event["items"]?["inserted"] == [["at": [0, 0], "id": "z"]])
        #expect(event["items"]?["deleted"] == [["at": [0, 1], "id": "b"]])
    }

    /// A refused windowed subscribe changes nothing: no collection is made for an anchor that
    /// cannot be there, and the `window` op needs a windowed subscription of this connection.
    @Test func refusedWindowRequestsChangeNothing() throws {
        let engine = ApplyEngine()
        let refused = engine.process([try job(#"subscribe nowhere {"window":{"anchor":"x"}}"#, slot: 0)])
        let refusal = try #require(Self.response(refused))
        #expect(refused.count == 1 && text(refusal).contains("unknown_item"))
        #expect(!engine.holds("nowhere"))
        _ = engine.process([try job(#"apply c {"sections":[{"id":"s","items":["a","b"]}]}"#, slot: 1)])
        _ = engine.process([try job(#"subscribe c"#, slot: 2)])
        let notWindowed = engine.process([try job(#"window c {"window":{"first":1}}"#, slot: 3)])
        #expect(text(try #require(Self.response(notWindowed))).contains("invalid_argument"))
        _ = engine.process([try job(#"subscribe c {"window":{"first":1}}"#, slot: 4)])
        let ghost = engine.process([try job(#"window c {"window":{"anchor":"ghost"}}"#, slot: 5)])
        #expect(text(try #require(Self.response(ghost))).contains("unknown_item"))
        // The subscription goes on with its window: a write to the first item reaches it.
        let next = windowEvents(engine.process([try job(#"update_items c {"items":[{"id":"a","data":1}]}"#, slot: 6)]))
        #expect(next.count == 1)
    }

    /// A windowed subscriber that fell behind is caught up from the view it holds (its version
    /// and range) to its window's view now, in one changeset.
    @Test func aWindowedCatchUpStartsFromTheViewItHolds() throws {
        let engine = ApplyEngine()
        _ = engine.process([try job(#"apply c {"sections":[{"id":"s","items":["a","b","c","d"]}]}"#, slot: 0)])
        _ = engine.process([try job(#"subscribe c {"window":{"last":2}}"#, connection: 9, slot: 0)])
        for (slot, item) in ["e", "f", "g"].enumerated() {
            _ = engine.process([try job(#"append_items c {"items":["\#(item)"]}"#, slot: UInt64(slot + 1))])
        }
        let outcomes = engine.process([
            .catchUp(connection: 9, collection: "c", since: 1, window: WindowRange(lower: 2, upper: 4, total: 4))
        ])
        guard case .caughtUp(_, _, let version, let bytes, let range?)? = outcomes.first else {
            Issue.record("no windowed catch-up: \(outcomes)")
            return
        }
        let event = try JSONParser.parse(Array(text(bytes).utf8.dropLast()))
        #expect(version == 4 && range == WindowRange(lower: 5, upper: 7, total: 7))
        #expect(event["from"] == .number("1") && event["version"] == .number("4"))
        #expect(event["items"]?["deleted"] == [["at": [0, 0], "id": "c"], ["at": [0, 1], "id": "d"]])
        #expect(event["items"]?["inserted"] == [["at": [0, 0], "id": "f"], ["at": [0, 1], "id": "g"]])
    }

    /// A batch that is undone (its log records could not be made durable) leaves the windows
    /// where they were: the next version's window event starts from the view subscribers hold.
    @Test func anUndoneBatchDoesNotMoveTheWindows() throws {
        let engine = ApplyEngine()
        _ = engine.process([try job(#"apply c {"sections":[{"id":"s","items":["a","b","c"]}]}"#, slot: 0)])
        _ = engine.commitLastBatch()
        _ = engine.process([try job(#"subscribe c {"window":{"first":2}}"#, connection: 5, slot: 0)])
        _ = engine.commitLastBatch()
        let undone = windowEvents(engine.process([try job(#"insert_items c {"before":"a","items":["z"]}"#, slot: 1)]))
        #expect(undone.count == 1)
        engine.rollBackLastBatch()
        let next = windowEvents(engine.process([try job(#"update_items c {"items":[{"id":"a","data":1}]}"#, slot: 2)]))
        let line = try #require(next.first).event.bytes(from: 1)
        let event = try JSONParser.parse(Array(String(decoding: line, as: UTF8.self).utf8.dropLast()))
        #expect(event["version"] == .number("2"))
        #expect(event["items"] == ["updated": [["at": [0, 0], "id": "a", "data": 1]]])
    }

    private static func response(_ outcomes: [Outcome]) -> SharedBytes? {
        for case .response(_, let response) in outcomes { return response.bytes }
        return nil
    }
}

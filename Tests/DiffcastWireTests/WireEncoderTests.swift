import DiffcastCore
import DiffcastWire
import Testing

@Suite struct WireEncoderTests {
    private func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    @Test func responsesEchoIDAndOp() {
        #expect(
            text(WireEncoder.success(id: JSONText(canonical: "41"), op: "ping"))
                == "{\"ok\":true,\"id\":41,\"op\":\"ping\"}\n")
        let failure = WireEncoder.failure(id: nil, op: "get", error: .unknownCollection("feed"))
        #expect(
            text(failure)
                == "{\"ok\":false,\"op\":\"get\",\"error\":{\"code\":\"unknown_collection\",\"message\":\"unknown collection 'feed'\"}}\n"
        )
    }

    @Test func deletionsNameTheirIdentifiers() {
        var changeset = Changeset()
        changeset.sections.deleted = [.init(at: 2, id: "old")]
        changeset.items.deleted = [.init(at: ItemPath(0, 3), id: Identifier(integerText: "7"))]
        let line = text(
            WireEncoder.changesetEvent(
                collection: "c", epoch: "e", from: 1, to: 2, changeset: changeset, digest: Digest(value: 255)))
        #expect(line.contains(#""sections":{"deleted":[{"index":2,"id":"old"}]}"#))
        #expect(line.contains(#""items":{"deleted":[{"at":[0,3],"id":"7"}]}"#))
        #expect(line.contains(#""digest":"00000000000000ff""#))
    }

    @Test func changesetEventsLeaveOutEmptyLists() throws {
        var changeset = Changeset()
        changeset.items.updated = [.init(at: ItemPath(0, 1), id: "t1", data: JSONText(canonical: "{\"likes\":2}"))]
        changeset.sections.reloaded = [.init(at: 0, id: "s")]
        let line = text(
            WireEncoder.changesetEvent(
                collection: "feed", epoch: "e", from: 4, to: 5, changeset: changeset, digest: Digest(of: Snapshot())))
        #expect(
            line == """
                {"event":"changeset","collection":"feed","epoch":"e","from":4,"version":5,\
                "sections":{"reloaded":[{"index":0,"id":"s"}]},\
                "items":{"updated":[{"at":[0,1],"id":"t1","data":{"likes":2}}]},"digest":"0000000000000000"}

                """)
        // Every line is one JSON object the parser takes back.
        _ = try JSONParser.parse(Array(line.utf8.dropLast()))
    }

    @Test func snapshotsWriteBareIdentifiersForItemsWithoutData() throws {
        var document = Document()
        try document.apply(
            .apply(sections: [
                SectionInput(
                    id: "s", data: JSONText(canonical: "\"S\""),
                    items: [Item(id: "a"), Item(id: "b", data: JSONText(canonical: "[1]"))])
            ]))
        let line = text(WireEncoder.snapshotEvent(collection: "c", epoch: "e", version: 1, snapshot: document.snapshot))
        #expect(line.contains(#""sections":[{"id":"s","data":"S","items":["a",{"id":"b","data":[1]}]}]"#))
        // model.py's digest of [["s", "S", [["a", None], ["b", [1]]]]].
        #expect(line.contains("\"digest\":\"0b86d20e1c312c67\""))
    }

    /// The answers one daemon relays from another are read back as they were written: whether
    /// each succeeded, the version it names, its id, op and error.
    @Test func relayedAnswersAreReadAsTheyWereWritten() throws {
        let written: [Response] = [
            .success(id: JSONText(canonical: "7"), op: "append_items", .version(12)),
            .success(id: nil, op: "subscribe", .subscribed(collection: "c", epoch: "e1", version: 3)),
            .success(id: JSONText(canonical: "\"x\""), op: "drop"),
            .failure(id: nil, op: "update_items", .unknownItem("t9")),
        ]
        for response in written {
            let line = WireEncoder.encode(response)
            let read = try ResponseDecoder.response(line)
            #expect(read.id == response.id && read.op == response.op && read.version == response.version)
            #expect(read.isSuccess == response.isSuccess)
            if case .failure(let error) = response.result {
                guard case .failure(.relayed(let code, let message)) = read.result else {
                    Issue.record("a failure read as \(read)")
                    continue
                }
                #expect(code == error.code && message == error.message)
            }
        }
        #expect(
            text(WireEncoder.encode(written[0])) == #"{"ok":true,"id":7,"op":"append_items","version":12}"# + "\n")
        // A state answer is never relayed, and is not read half.
        let state = WireEncoder.encode(
            .success(id: nil, op: "get", .state(collection: "c", epoch: "e", version: 1, Snapshot(), window: nil)))
        #expect(throws: Malformed.self) { try ResponseDecoder.response(state) }
        #expect(throws: Malformed.self) { try ResponseDecoder.response(Array("{\"ok\":\"yes\"}".utf8)) }
    }

    /// `list` and `stats` answers, byte for byte as the daemon wrote them before they became
    /// values (the expected lines are written out by hand).
    @Test func listAndStatsAnswersKeepTheirBytes() {
        let list = WireEncoder.encode(
            .success(
                id: JSONText(canonical: "1"), op: "list",
                .collections([
                    CollectionRow(name: "a", version: 3, sections: 1, items: 2, subscribers: 0),
                    CollectionRow(name: "b\"", version: 0, sections: 0, items: 0, subscribers: 5),
                ])))
        #expect(
            text(list) == #"{"ok":true,"id":1,"op":"list","collections":[{"name":"a","version":3,"sections":1,"#
                + #""items":2,"subscribers":0},{"name":"b\"","version":0,"sections":0,"items":0,"subscribers":5}]}"#
                + "\n")
        let empty = WireEncoder.encode(.success(id: nil, op: "list", .collections([])))
        #expect(text(empty) == #"{"ok":true,"op":"list","collections":[]}"# + "\n")
        let stats = WireEncoder.encode(
            .success(
                id: nil, op: "stats",
                .statistics(
                    StatisticsReport(
                        counters: [("connections", 2), ("requests", 7)],
                        backbone: ("n1", [("owned_collections", 1), ("log_behind", 0)]), readOnlyReason: "disk full"))))
        #expect(
            text(stats) == #"{"ok":true,"op":"stats","connections":2,"requests":7,"#
                + #""backbone":{"node":"n1","owned_collections":1,"log_behind":0},"#
                + #""read_only":true,"read_only_reason":"disk full"}"# + "\n")
        let plain = WireEncoder.encode(
            .success(
                id: nil, op: "stats",
                .statistics(StatisticsReport(counters: [("catch_ups", 0)], backbone: nil, readOnlyReason: nil))))
        #expect(text(plain) == #"{"ok":true,"op":"stats","catch_ups":0,"read_only":false}"# + "\n")
    }
}

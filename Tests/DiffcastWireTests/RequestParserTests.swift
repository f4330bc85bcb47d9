import DiffcastCore
import DiffcastWire
import Testing

@Suite struct RequestParserTests {
    let parser = RequestParser()

    private func parse(_ line: String) throws(RequestError) -> Request {
        try parser.parse(line: Array(line.utf8))
    }

    private func code(_ line: String) -> String? {
        do {
            _ = try parse(line)
            return nil
        } catch {
            return error.error.code
        }
    }

    @Test func inlineAndJSONFormsAreOneRequest() throws {
        let json = try parse(#"{"op":"subscribe","collection":"feed","since":3}"#)
        let inline = try parse(#"subscribe feed {"since":3}"#)
        #expect(json == inline)
        #expect(json.command == .subscribe(collection: "feed", since: 3, epoch: nil))
        #expect(try parse("ping\r").command == .ping)
        #expect(try parse(#"append_items feed {"items":["x"],"id":9}"#).id == JSONText(canonical: "9"))
    }

    @Test func integerIdentifiersAreTheirDecimalText() throws {
        let request = try parse(#"{"op":"append_items","collection":"c","items":[7,"7",{"id":-12,"data":null}]}"#)
        guard case .write(_, .appendItems(let items, nil)) = request.command else {
            Issue.record("not an append_items: \(request.command)")
            return
        }
        #expect(items == [Item(id: "7"), Item(id: "7"), Item(id: "-12")])
    }

    @Test func dataKeepsKeyOrderAndIsCompacted() throws {
        let request = try parse(
            #"{"op":"update_items","collection":"c","items":[{"id":"a","data":{ "z" : 1, "a" : [ true , "é\n" ] }}]}"#)
        guard case .write(_, .updateItems(let updates)) = request.command else {
            Issue.record("not an update_items")
            return
        }
        #expect(updates.first?.data?.text == #"{"z":1,"a":[true,"é\n"]}"#)
    }

    @Test(arguments: [
        ("this is not a request", "parse_error"),
        ("append_items c {not json", "parse_error"),
        (#"{"op":"ping""#, "parse_error"),
        ("[1,2,3]", "parse_error"),
        (#"{"op":42}"#, "invalid_argument"),
        (#"{"op":"frobnicate","collection":"c"}"#, "unknown_op"),
        (#"{"op":"append_sections","collection":"bad name!","sections":[]}"#, "invalid_name"),
        (#"{"op":"append_sections","sections":[]}"#, "invalid_argument"),
        (#"{"op":"append_items","collection":"c","items":{"no":"list"}}"#, "invalid_argument"),
        (#"{"op":"apply","collection":"c","sections":[{"id":"s","items":[{"id":1.5}]}]}"#, "invalid_argument"),
        (#"{"op":"apply","collection":"c","sections":[{"id":"s","items":[{"id":""}]}]}"#, "invalid_argument"),
        (#"{"op":"apply","collection":"c","sections":[{"id":true}]}"#, "invalid_argument"),
        (#"{"op":"move_item","collection":"c","item":"a","before":"b","after":"c"}"#, "invalid_argument"),
        (#"{"op":"batch","collection":"c","ops":[{"op":"drop"}]}"#, "invalid_argument"),
        (#"{"op":"subscribe","collection":"c","since":-1}"#, "invalid_argument"),
    ])
    func badRequestsGetTheirCode(line: String, expected: String) {
        #expect(code(line) == expected)
    }

    @Test func identifiersPastTheLimitAreRejected() {
        let long = String(repeating: "x", count: 1025)
        #expect(code(#"{"op":"delete_items","collection":"c","items":[""# + long + #""]}"#) == "invalid_argument")
        let limit = String(repeating: "x", count: 1024)
        #expect(code(#"{"op":"delete_items","collection":"c","items":[""# + limit + #""]}"#) == nil)
    }

    @Test func errorsEchoTheRequestIDAndOp() {
        do {
            _ = try parse(#"{"op":"move_item","collection":"c","id":[1,"x"]}"#)
            Issue.record("expected an error")
        } catch {
            #expect(error.id == JSONText(canonical: #"[1,"x"]"#))
            #expect(error.op == "move_item")
        }
    }
}

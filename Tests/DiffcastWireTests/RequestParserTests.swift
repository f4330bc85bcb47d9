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

    /// A request keeps its line (without a closing `\r`) only when its parser keeps lines; its
    /// length it keeps either way. The same line read both ways is the same request otherwise.
    @Test(arguments: [
        #"{"op":"append_items","collection":"c","items":[{"id":"a","data":{"n":1}}]}"#,
        #"append_items c {"items":["a"]}"#,
    ])
    func theLineIsKeptOnlyWhenAsked(text: String) throws {
        let line = Array((text + "\r").utf8)
        let kept = try RequestParser(keepsLines: true).parse(line: line)
        let notKept = try RequestParser(keepsLines: false).parse(line: line)
        #expect(kept.line == Array(text.utf8))
        #expect(kept.lineLength == text.utf8.count)
        #expect(notKept.line.isEmpty)
        #expect(notKept.lineLength == text.utf8.count)
        #expect(notKept.command == kept.command && notKept.op == kept.op && notKept.id == kept.id)
        // From a slice that is not an array, and from a buffer, the same.
        let framed = Array((text + "\r\n").utf8)
        #expect(try RequestParser().parse(line: framed.dropLast()) == kept)
        var workspace = RequestParser.Workspace()
        let fromBuffer = try line.withUnsafeBufferPointer { bytes throws(RequestError) in
            try RequestParser(keepsLines: false).parse(bytes, reusing: &workspace)
        }
        #expect(fromBuffer == notKept)
    }

    /// One workspace lent to line after line, as the loop lends it, reads each line as a fresh
    /// one does, whatever the lines before left in it: failures halfway through, and a line
    /// whose tokens are more than the workspace keeps, included.
    @Test func aReusedWorkspaceReadsEachLineAsAFreshOneDoes() {
        let many = Array(repeating: "[0,{}]", count: 6000).joined(separator: ",")
        let lines = [
            #"{"op":"append_items","collection":"c","items":[{"id":"a","data":{"t":[1,2,{"u":null}]}},"b"]}"#,
            #"{"op":"append_items","collection":"c","items":[{"id":"a","data":{"t":1,"t":2}}]}"#,
            #"{"op":"append_items","collection":"c","items":[{"id":"a","data":{"t": 1}},{"id":"b","data":[true]}]}"#,
            #"{"op": "append_items", "collection": "c", "items": [{"id": "a", "data": {"x": [1, 2]}}]}"#,
            #"{"op":"append_items","collection":"c","items":[{"id":"a","data":[\#(many)]}]}"#,
            #"update_items c {"items":[{"id":"a","data":{"k":"v"}}]}"#,
            #"{"op":"apply","collection":"c","sections":[{"id":"s","items":["a",{"id":"b","data":2}]}],"x":1}"#,
            #"{"op":"append_items","collection":"c","items":[{"id":"a","data":"é"}],"section":"s"}"#,
        ]
        var workspace = RequestParser.Workspace()
        for line in lines + lines.reversed() {
            let bytes = Array(line.utf8)
            let reused = bytes.withUnsafeBufferPointer { bytes in
                Result { () throws(RequestError) in try parser.parse(bytes, reusing: &workspace) }
            }
            let fresh = Result { () throws(RequestError) in try RequestParser().parse(line: bytes) }
            #expect(reused == fresh, "\(line.prefix(120))")
        }
    }

    /// A request's fields live in one box its copies share: changing a copy changes that copy
    /// alone, and copies that hold the same fields are equal.
    @Test func aChangedCopyOfARequestLeavesTheOthersAlone() throws {
        let parsed = try RequestParser().parse(line: Array(#"append_items c {"items":["a"]}"#.utf8))
        var changed = parsed
        #expect(changed == parsed)
        changed.line = Array("x".utf8)
        changed.op = "other"
        changed.id = JSONText(canonical: "7")
        #expect(parsed.line == Array(#"append_items c {"items":["a"]}"#.utf8))
        #expect(parsed.op == "append_items" && parsed.id == nil)
        #expect(changed.line == Array("x".utf8) && changed.op == "other" && changed.id == JSONText(canonical: "7"))
        #expect(changed.command == parsed.command)
        #expect(changed != parsed)
        var rebuilt = changed
        rebuilt.line = parsed.line
        rebuilt.op = parsed.op
        rebuilt.id = nil
        #expect(rebuilt == parsed)
    }

    @Test func inlineAndJSONFormsAreOneRequest() throws {
        let json = try parse(#"{"op":"subscribe","collection":"feed","since":3}"#)
        let inline = try parse(#"subscribe feed {"since":3}"#)
        #expect(json.command == inline.command && json.id == inline.id && json.op == inline.op)
        #expect(json.line == Array(#"{"op":"subscribe","collection":"feed","since":3}"#.utf8))
        #expect(json.command == .subscribe(collection: "feed", since: 3, epoch: nil))
        #expect(try parse("ping\r").command == .ping)
        #expect(try parse(#"append_items feed {"items":["x"],"id":9}"#).id == JSONText(canonical: "9"))
    }

    /// A mistyped op, in either form, is an unknown op that names the op it most likely meant.
    @Test(arguments: [
        ("APPLY feed {}", "unknown op 'APPLY'; did you mean 'apply'?"),
        ("updateitems feed {}", "unknown op 'updateitems'; did you mean 'update_items'?"),
        (#"{"op":"updat_items"}"#, "unknown op 'updat_items'; did you mean 'update_items'?"),
        ("Subscribe feed", "unknown op 'Subscribe'; did you mean 'subscribe'?"),
        ("frobnicate feed", "unknown op 'frobnicate'"),
        (#"batch c {"ops":[{"op":"GET"}]}"#, "ops[0]: unknown op 'GET'"),
    ])
    func aMistypedOpIsNamedWithWhatItMeant(line: String, message: String) {
        do {
            _ = try parse(line)
            Issue.record("\(line) parsed")
        } catch {
            #expect(error.error.code == "unknown_op")
            #expect(error.error.message == message)
        }
    }

    @Test func inlineAuthTakesTheTokenAsItsWord() throws {
        #expect(try parse("auth s3cret").command == parse(#"{"op":"auth","token":"s3cret"}"#).command)
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

    /// A typo in a key never silently changes what a write means: every op, and every section,
    /// item and update inside one, rejects a key it does not take, and the message names it.
    @Test(arguments: [
        (#"{"op":"update_items","collection":"c","items":[{"id":"a","dta":{"likes":6}}]}"#, "dta"),
        (#"{"op":"append_items","collection":"c","items":["k"],"secton":"s1"}"#, "secton"),
        (#"{"op":"insert_items","collection":"c","items":["k"],"befor":"a","after":"b"}"#, "befor"),
        (#"{"op":"apply","collection":"c","sections":[{"id":"s","itmes":[]}]}"#, "itmes"),
        (#"{"op":"apply","collection":"c","sections":[{"id":"s","items":[{"id":"a","date":1}]}]}"#, "date"),
        (#"{"op":"update_sections","collection":"c","sections":[{"id":"s","items":[]}]}"#, "items"),
        (#"{"op":"delete_all","collection":"c","items":["a"]}"#, "items"),
        (#"{"op":"get","collection":"c","since":3}"#, "since"),
        (#"{"op":"subscribe","collection":"c","snice":3}"#, "snice"),
        (#"{"op":"ping","colection":"c"}"#, "colection"),
        (#"{"op":"batch","collection":"c","ops":[{"op":"delete_all","collection":"c"}]}"#, "collection"),
        (#"update_items c {"items":[{"id":"a","data":1,"Data":2}]}"#, "Data"),
    ])
    func anUnknownKeyIsRejectedByName(line: String, key: String) {
        do {
            _ = try parse(line)
            Issue.record("accepted: \(line)")
        } catch {
            #expect(error.error.code == "invalid_argument")
            #expect(error.error.message.contains("'\(key)'"), "\(error.error.message)")
        }
    }

    @Test(arguments: [
        #"{"op":"ping","op":"ping"}"#,
        #"{"op":"update_items","collection":"c","items":[{"id":"a","data":{"x":1,"x":2}}]}"#,
        #"subscribe c {"collection":"d"}"#,
        #"{"op":"update_items","collection":"c","items":[{"id":"a","data":{"\u00e9":1,"\u00e9":2}}]}"#,
    ])
    func aDuplicateKeyIsAParseError(line: String) {
        #expect(code(line) == "parse_error")
    }

    @Test func keysThatAreCanonicallyEquivalentAreStillTwoKeys() throws {
        let request = try parse(
            #"{"op":"update_items","collection":"c","items":[{"id":"a","data":{"\u00e9":1,"e\u0301":2}}]}"#)
        guard case .write(_, .updateItems(let updates)) = request.command else {
            Issue.record("not an update_items")
            return
        }
        #expect(updates.first?.data?.text == "{\"\u{e9}\":1,\"e\u{301}\":2}")
    }

    @Test func identifiersAreTheirBytesAndMinusZeroIsZero() throws {
        let request = try parse(#"{"op":"append_items","collection":"c","items":["\u00e9","e\u0301",-0,0]}"#)
        guard case .write(_, .appendItems(let items, nil)) = request.command else {
            Issue.record("not an append_items")
            return
        }
        #expect(items.map(\.id.text.utf8.count) == [2, 3, 1, 1])
        #expect(items[0].id != items[1].id)
        #expect(items[2].id == items[3].id && items[2].id.text == "0")
    }

    @Test func aBadBatchEntryIsNamedByItsIndex() {
        do {
            _ = try parse(#"{"op":"batch","collection":"c","ops":[{"op":"delete_all"},{"op":"move_item","item":"a"}]}"#)
            Issue.record("accepted")
        } catch {
            #expect(error.error.code == "invalid_argument")
            #expect(error.error.message.hasPrefix("ops[1]: "), "\(error.error.message)")
        }
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

import DiffcastCore
import DiffcastTestSupport
import Testing

@testable import DiffcastWire

/// The shortcut for compact `append_items` lines against the general path, its oracle: what it
/// reads must be what the general path makes of the same line, and what it does not take (or
/// the general path refuses) it must leave alone.
@Suite struct CompactAppendReaderTests {
    let limits = RequestLimits()

    private func compact(_ line: String, limits: RequestLimits? = nil) -> Request? {
        var tokens: [JSONToken] = []
        return Array(line.utf8).withUnsafeBufferPointer {
            CompactAppendReader.request(from: $0, limits: limits ?? self.limits, tokens: &tokens)
        }
    }

    private func general(_ line: String, limits: RequestLimits? = nil) -> Result<Request, RequestError> {
        let parser = RequestParser(limits: limits ?? self.limits)
        var workspace = RequestParser.Workspace()
        return Array(line.utf8).withUnsafeBufferPointer { line in
            Result { () throws(RequestError) in try parser.decodeInGeneral(line, &workspace) }
        }
    }

    private static let longName = String(repeating: "n", count: 128)
    private static let longID = String(repeating: "i", count: 1024)

    @Test(arguments: [
        #"{"op":"append_items","collection":"feed","items":["a"]}"#,
        #"{"op":"append_items","collection":"feed","items":[{"id":"f1","data":{"text":"hello"}}]}"#,
        #"{"op":"append_items","collection":"a.b:c-d_1","items":["x",{"id":"y"},{"id":"z","data":null}]}"#,
        #"{"op":"append_items","collection":"c","items":[{"id":"n","data":-1.5e3},{"id":"t","data":true}]}"#,
        #"{"op":"append_items","collection":"c","items":[{"id":"s","data":"say \"hi\"\n\u0001 é"}]}"#,
        #"{"op":"append_items","collection":"c","items":[{"id":"a b/c","data":[1,{"k":[]},{}]}]}"#,
        #"{"op":"append_items","collection":"c","items":["a",{"id":"b","data":2}],"section":"s 1"}"#,
        #"{"op":"append_items","collection":"\#(longName)","items":["\#(longID)"]}"#,
    ])
    func readsItsShapeAsTheGeneralPathDoes(line: String) throws {
        let read = try #require(compact(line))
        #expect(read == (try general(line).get()))
    }

    @Test func itsItemsAreTheOnesWritten() throws {
        let line = #"{"op":"append_items","collection":"feed","items":["a",{"id":"b"},{"id":"c","data":{"k":1}}]}"#
        let read = try #require(compact(line))
        #expect(read.id == nil && read.op == "append_items")
        #expect(
            read.command
                == .write(
                    collection: "feed",
                    .appendItems(
                        [Item(id: "a"), Item(id: "b"), Item(id: "c", data: JSONText(canonical: #"{"k":1}"#))],
                        section: nil)))
    }

    /// Lines in another shape, or that the general path refuses: left to the general path.
    @Test(arguments: [
        (#"{"op":"append_items", "collection":"feed","items":["a"]}"#, true),
        (#"{"op":"append_items","collection":"feed","items":["a"]} "#, true),
        (#"{"collection":"feed","op":"append_items","items":["a"]}"#, true),
        (#"{"op":"append_items","collection":"feed","section":"s","items":["a"]}"#, true),
        (#"{"op":"append_items","collection":"feed","items":["a"],"section":5}"#, true),
        (#"{"op":"append_items","collection":"feed","items":["a"],"section":"s\u0041"}"#, true),
        (#"{"op":"append_items","collection":"feed","items":["a"],"section":""}"#, false),
        (#"{"op":"append_items","collection":"feed","items":["a"],"section":"s","id":1}"#, true),
        (#"{"op":"append_items","collection":"feed","items":["a"],"section":"s"]"#, false),
        (#"{"op":"append_items","collection":"feed","items":["a"],"id":7}"#, true),
        (#"{"op":"append_items","collection":"feed","items":["a\"b"]}"#, true),
        (#"{"op":"append_items","collection":"feed","items":["é"]}"#, true),
        (#"{"op":"append_items","collection":"feed","items":[5]}"#, true),
        (#"{"op":"append_items","collection":"feed","items":[]}"#, true),
        (#"{"op":"append_items","collection":"feed","items":[{"data":1,"id":"a"}]}"#, true),
        (#"{"op":"append_items","collection":"feed","items":[{"id":"a","data":{"k": 1}}]}"#, true),
        (#"{"op":"append_items","collection":"feed","items":[{"id":"a","data":"\/"}]}"#, true),
        (#"{"op":"append_items","collection":"feed","items":[{"id":"a","data":1,"x":2}]}"#, false),
        (#"{"op":"append_items","collection":"feed","items":[{"id":"a","data":{"k":1,"k":2}}]}"#, false),
        (#"{"op":"append_items","collection":"feed","items":[{"id":"a","data":tru}]}"#, false),
        (#"{"op":"append_items","collection":"feed","items":[{"id":"a","data":"\u00e"}]}"#, false),
        (#"{"op":"append_items","collection":"feed","items":["a"]"#, false),
        (#"{"op":"append_items","collection":"feed","items":["a"]}}"#, false),
        (#"{"op":"append_items","collection":"feed","items":["a",]}"#, false),
        (#"{"op":"append_items","collection":"bad name","items":["a"]}"#, false),
        (#"{"op":"append_items","collection":"","items":["a"]}"#, false),
        (#"{"op":"append_items","collection":"\#(longName)n","items":["a"]}"#, false),
        (#"{"op":"append_items","collection":"feed","items":[""]}"#, false),
        (#"{"op":"append_items","collection":"feed","items":["\#(longID)i"]}"#, false),
        (#"{"op":"append_items","collection":"feed","items":[{"id":""}]}"#, false),
    ])
    func leavesOtherLinesToTheGeneralPath(line: String, generalTakesIt: Bool) {
        #expect(compact(line) == nil)
        // The second column says which lines the general path takes: the others it refuses, so
        // the reader had to leave them alone for the error to name the culprit.
        #expect(((try? general(line).get()) != nil) == generalTakesIt)
    }

    @Test func refusesDataDeeperThanTheLimit() {
        let line = #"{"op":"append_items","collection":"c","items":[{"id":"a","data":[[1]]}]}"#
        let fits = RequestLimits(maximumDepth: 5)
        let tooDeep = RequestLimits(maximumDepth: 4)
        #expect(compact(line, limits: fits) == (try? general(line, limits: fits).get()))
        #expect(compact(line, limits: fits) != nil)
        #expect(compact(line, limits: tooDeep) == nil)
        #expect((try? general(line, limits: tooDeep).get()) == nil)
        let shallow = RequestLimits(maximumDepth: 2)
        #expect(compact(#"{"op":"append_items","collection":"c","items":["a"]}"#, limits: shallow) == nil)
    }

    /// Identifier limits come from the caller: one below 1 makes every identifier too long,
    /// on both paths, rather than a range that cannot be formed.
    @Test func aZeroIdentifierLimitRefusesEveryIdentifier() {
        let none = RequestLimits(maximumIdentifierBytes: 0)
        let line = #"{"op":"append_items","collection":"c","items":["a"]}"#
        #expect(compact(line, limits: none) == nil)
        #expect((try? general(line, limits: none).get()) == nil)
    }

    /// The law on lines made by mutating lines of the shape: a byte changed, dropped or added
    /// anywhere, from an alphabet of what matters to JSON. Whenever the reader takes a line,
    /// the general path takes it too and makes the same request.
    @Test(arguments: [1, 2, 3] as [UInt64])
    func whatItReadsIsWhatTheGeneralPathReads(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        let alphabet = Array(#"{}[]":,\ a1-.eEnul/é"#.utf8) + [0x09, 0x7f, 0x00]
        let shapes = [
            #"{"op":"append_items","collection":"feed","items":["a","b"]}"#,
            #"{"op":"append_items","collection":"c","items":[{"id":"x","data":{"t":"u","n":[1,2]}},{"id":"y"}]}"#,
            #"{"op":"append_items","collection":"c","items":[{"id":"x","data":"a\"b\\c"},"z"]}"#,
            #"{"op":"append_items","collection":"c","items":["y"],"section":"s"}"#,
        ]
        var taken = 0
        for _ in 0..<3_000 {
            var bytes = Array(shapes.randomElement(using: &random)!.utf8)
            for _ in 0..<Int.random(in: 0...2, using: &random) {
                let at = Int.random(in: 0..<bytes.count, using: &random)
                switch Int.random(in: 0..<3, using: &random) {
                case 0: bytes[at] = alphabet.randomElement(using: &random)!
                case 1: bytes.remove(at: at)
                default: bytes.insert(alphabet.randomElement(using: &random)!, at: at)
                }
            }
            let line = String(decoding: bytes, as: UTF8.self)
            guard String(validating: bytes, as: UTF8.self) != nil, let read = compact(line) else { continue }
            taken += 1
            #expect(read == (try? general(line).get()), "\(line)")
        }
        // Unchanged lines and harmless changes (inside an identifier or a string) are taken.
        #expect(taken > 300)
    }
}

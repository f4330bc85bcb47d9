import DiffcastCore
import DiffcastTestSupport
import Testing

@testable import DiffcastWire

@Suite struct JSONParserTests {
    private func canonical(_ text: String) throws -> String {
        try JSONParser.parse(Array(text.utf8)).canonicalText
    }

    @Test func canonicalTextIsCompactAndKeepsOrder() throws {
        #expect(try canonical(#" { "b" : [ 1 , -2.5e3 , null ] , "a" : { } } "#) == #"{"b":[1,-2.5e3,null],"a":{}}"#)
        #expect(try canonical(#""\u00e9\ud83d\ude00\t\"\\\/""#) == "\"é😀\\t\\\"\\\\/\"")
        #expect(try canonical(#""\u0001""#) == #""\u0001""#)
    }

    /// Data is written into one allocation of the length it predicts.
    @Test(arguments: [
        #"{"b":[1,-2.5e3,null,true,false],"a":{},"c":[]}"#, #""\u00e9\ud83d\ude00\t\"\\\/""#,
        #""\u0001\u001f\b\f\r\n""#,
        #"[[],[{}],{"k\"ey":"v"}]"#, "0", "\"\"",
    ])
    func canonicalLengthIsTheLengthOfTheCanonicalText(text: String) throws {
        let value = try JSONParser.parse(Array(text.utf8))
        #expect(value.canonicalLength == value.canonicalText.utf8.count)
        #expect(value.asData?.text == value.canonicalText)
    }

    @Test(arguments: [
        "", "{", "[1,]", "01", "1.", "-", "tru", "\"abc", "{\"a\" 1}", "[1 2]", "\"\\x\"", "\"\\ud800\"", "1 2",
    ])
    func malformedJSONIsAParseError(text: String) {
        #expect(throws: DiffcastError.self) { try JSONParser.parse(Array(text.utf8)) }
        do {
            _ = try JSONParser.parse(Array(text.utf8))
        } catch {
            #expect(error.code == "parse_error")
        }
    }

    @Test func invalidUTF8IsAParseError() {
        let bytes: [UInt8] = [0x22, 0xff, 0xfe, 0x22]
        #expect(throws: DiffcastError.self) { try JSONParser.parse(bytes) }
    }

    /// Strings are read several bytes at a time: every byte value, at every offset across
    /// those words, is judged by RFC 8259's rules (a control character, a lone quote, a bad
    /// escape or a lone byte of 0x80 and up make it malformed; anything else is itself).
    @Test func everyByteAtEveryOffsetOfAStringIsJudgedAlike() throws {
        for offset in 0..<20 {
            let before = [UInt8](repeating: UInt8(ascii: "a"), count: offset)
            let after = [UInt8](repeating: UInt8(ascii: "c"), count: 19 - offset)
            for byte in UInt8.min...UInt8.max {
                let text = [UInt8(ascii: "\"")] + before + [byte] + after + [UInt8(ascii: "\"")]
                let malformed = byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte >= 0x80
                if malformed {
                    #expect(throws: DiffcastError.self, "byte \(byte) at \(offset)") { try JSONParser.parse(text) }
                } else {
                    let expected = String(decoding: before + [byte] + after, as: UTF8.self)
                    #expect(try JSONParser.parse(text) == .string(expected), "byte \(byte) at \(offset)")
                }
            }
            let accented = [UInt8(ascii: "\"")] + before + Array("é".utf8) + after + [UInt8(ascii: "\"")]
            let expected = String(decoding: accented.dropFirst().dropLast(), as: UTF8.self)
            #expect(try JSONParser.parse(accented) == .string(expected))
        }
    }

    @Test func nestingPastTheLimitIsALimitError() throws {
        let deep = String(repeating: "[", count: 257) + String(repeating: "]", count: 257)
        #expect(throws: DiffcastError.limitExceeded("JSON nested deeper than 256 levels")) {
            try JSONParser.parse(Array(deep.utf8))
        }
        let allowed = String(repeating: "[", count: 256) + String(repeating: "]", count: 256)
        _ = try JSONParser.parse(Array(allowed.utf8))
        let huge = String(repeating: "[", count: 100_000)
        #expect(throws: DiffcastError.self) { try JSONParser.parse(Array(huge.utf8)) }
    }

    /// Data taken straight from the request text (when it is already canonical) is what
    /// writing the parsed tree gives, for any spacing and any way of escaping.
    @Test(arguments: [1, 2, 3, 4] as [UInt64])
    func dataFromTheSourceIsTheCanonicalTextOfTheTree(seed: UInt64) throws {
        var generator = SplitMix64(seed: seed)
        var fromSource = 0
        for _ in 0..<2_000 {
            let text = Self.randomJSON(&generator, depth: 0)
            let tree = try JSONParser.parse(Array(text.utf8))
            let viewed = try Array(text.utf8).withUnsafeBufferPointer { buffer in
                try JSONParser.withView(of: buffer, maximumDepth: 256) { view in
                    (data: view.asData?.text, canonical: view.canonicalText, value: view.jsonValue)
                }
            }
            var written = JSONOutput()
            written.append(tree)
            #expect(viewed.data == tree.asData?.text, "\(text)")
            #expect(viewed.canonical == written.string, "\(text)")
            #expect(viewed.value == tree, "\(text)")
            if viewed.canonical.utf8.count == text.utf8.count { fromSource += 1 }
        }
        #expect(fromSource > 100, "some texts are canonical as written")
    }

    /// Golden values from elsewhere: Python's `json.dumps(json.loads(text), ensure_ascii=False,
    /// separators=(",", ":"))`. No Unicode normalization: "é" written two ways stays two texts.
    @Test func canonicalTextMatchesPython() throws {
        let cases = [
            (#"{ "b" : "x\/y" , "a" : [ 1 , 25 ] }"#, #"{"b":"x/y","a":[1,25]}"#),
            (
                #"["\u00e9\u0301", "e\u0301", "\u001F\u001f\n\t\"", "\ud83d\ude00"]"#,
                "[\"\u{e9}\u{301}\",\"e\u{301}\",\"\\u001f\\u001f\\n\\t\\\"\",\"😀\"]"
            ),
            (#"{"k":{"n":null,"t":true}}"#, #"{"k":{"n":null,"t":true}}"#),
        ]
        for (text, python) in cases {
            let data = try Array(text.utf8).withUnsafeBufferPointer { buffer in
                try JSONParser.withView(of: buffer, maximumDepth: 256) { $0.asData?.text }
            }
            #expect(data.map { Array($0.utf8) } == Array(python.utf8), "\(text)")
        }
    }

    /// A key written with an escape is the same key: a duplicate, in small and large objects.
    @Test(arguments: [2, 20])
    func aKeySpelledWithAnEscapeIsADuplicate(members: Int) {
        let others = (1..<members).map { #""x\#($0)":0,"# }.joined()
        let text = "{\"a\":1," + others + #""\u0061":2}"#
        #expect(throws: DiffcastError.parseError("duplicate key 'a' in one object at byte \(text.utf8.count - 11)")) {
            try JSONParser.parse(Array(text.utf8))
        }
    }

    /// A JSON text with random spacing, escapes written every way, and nesting.
    private static func randomJSON(_ generator: inout SplitMix64, depth: Int) -> String {
        func pick(_ choices: [String]) -> String { choices[Int.random(in: 0..<choices.count, using: &generator)] }
        let space = { (generator: inout SplitMix64) -> String in
            ["", "", "", " ", "\n\t "][Int.random(in: 0..<5, using: &generator)]
        }
        func string() -> String {
            let pieces = [
                "a", "é", "x y", "😀", #"\n"#, #"\""#, #"\\"#, #"\/"#, #"\u00e9"#, #"\u001f"#, #"\u001F"#,
                #"\u0007"#, #"\b"#, #"\ud83d\ude00"#, #"\u0041"#,
            ]
            return "\"" + (0..<Int.random(in: 0..<4, using: &generator)).map { _ in pick(pieces) }.joined() + "\""
        }
        switch Int.random(in: 0..<(depth > 3 ? 4 : 7), using: &generator) {
        case 0: return pick(["null", "true", "false"])
        case 1: return pick(["0", "-0", "12", "1.5e3", "-2.25E-2"])
        case 2, 3: return string()
        case 4:
            let elements = (0..<Int.random(in: 0..<4, using: &generator)).map { _ in
                space(&generator) + randomJSON(&generator, depth: depth + 1) + space(&generator)
            }
            return "[" + elements.joined(separator: ",") + space(&generator) + "]"
        default:
            let members = (0..<Int.random(in: 0..<4, using: &generator)).map { index in
                let key = Bool.random(using: &generator) ? "\"k\(index)\"" : "\"\\u006b\(index)\""
                return space(&generator) + key + space(&generator) + ":" + space(&generator)
                    + randomJSON(&generator, depth: depth + 1)
            }
            return "{" + members.joined(separator: ",") + space(&generator) + "}"
        }
    }
}

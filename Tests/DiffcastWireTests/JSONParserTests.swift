import DiffcastCore
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
}

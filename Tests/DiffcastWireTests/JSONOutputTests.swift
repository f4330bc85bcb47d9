import Testing

@testable import DiffcastWire

struct JSONOutputTests {
    /// Numbers are written digit by digit into room on the stack: checked against the standard
    /// library's own conversion at every length and at both ends of the types.
    @Test func numbersAreWrittenAsTheStandardLibraryWritesThem() {
        var numbers: [Int64] = [0, 1, 9, 10, 11, 99, 100, 101, Int64.max, Int64.min, Int64.min + 1, -1, -10]
        var power: Int64 = 1
        for _ in 0..<18 {
            power *= 10
            numbers += [power - 1, power, power + 1, -power]
        }
        for number in numbers {
            var output = JSONOutput()
            output.append(number)
            #expect(output.string == String(number))
        }
        for number: UInt64 in [UInt64.max, UInt64.max - 1, 10_000_000_000_000_000_000, 9_999_999_999_999_999_999] {
            var output = JSONOutput()
            output.append(number)
            #expect(output.string == String(number))
        }
    }

    /// Every byte below 0x20, the quote and the backslash are escaped as Python's `json.dumps`
    /// escapes them; the rest, multi-byte UTF-8 included, is copied.
    @Test func stringsAreEscapedAsPythonEscapesThem() {
        let named: [UInt8: String] = [0x08: #"\b"#, 0x09: #"\t"#, 0x0a: #"\n"#, 0x0c: #"\f"#, 0x0d: #"\r"#]
        for byte in UInt8(0)..<0x20 {
            var output = JSONOutput()
            output.append(string: "a" + String(UnicodeScalar(byte)) + "b")
            let hex = String(byte, radix: 16)
            let escape = named[byte] ?? #"\u00"# + (hex.count == 1 ? "0" + hex : hex)
            #expect(output.string == "\"a" + escape + "b\"")
        }
        var output = JSONOutput()
        output.append(string: #"say "hi" \ é😀"#)
        #expect(output.string == #""say \"hi\" \\ é😀""#)
        var empty = JSONOutput()
        empty.append(string: "")
        #expect(empty.string == #""""#)
    }
}

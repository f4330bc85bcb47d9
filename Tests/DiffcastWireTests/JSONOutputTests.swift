import Testing

@testable import DiffcastWire

struct JSONOutputTests {
    /// Numbers are written two digits at a time into room on the stack: checked against the
    /// standard library's own conversion at every length, at both ends of the types, and for
    /// every number below 10,000 (every pair of digits in every place up to four).
    @Test func numbersAreWrittenAsTheStandardLibraryWritesThem() {
        var numbers: [Int64] = [Int64.max, Int64.min, Int64.min + 1, -1, -10] + (0..<10_000).map(Int64.init)
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

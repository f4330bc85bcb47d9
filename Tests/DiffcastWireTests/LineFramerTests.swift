import DiffcastWire
import Testing

@Suite struct LineFramerTests {
    private func pieces(_ chunks: [String], limit: Int = 8) -> [String] {
        var framer = LineFramer(maximumLineBytes: limit)
        var result: [String] = []
        for chunk in chunks {
            Array(chunk.utf8).withUnsafeBytes { bytes in
                framer.feed(bytes) { piece in
                    switch piece {
                    case .line(let line): result.append(String(decoding: line, as: UTF8.self))
                    case .lineTooLong: result.append("<too long>")
                    }
                }
            }
        }
        return result
    }

    @Test func linesSplitAcrossChunksAreJoined() {
        #expect(pieces(["pi", "ng\nget", " c\n"]) == ["ping", "get c"])
    }

    @Test func aLongLineIsReportedOnceAndSkipped() {
        #expect(pieces(["0123456789", "abcdef", "ghi\nping\n"]) == ["<too long>", "ping"])
        #expect(pieces(["0123456789\nping\n"]) == ["<too long>", "ping"])
        #expect(pieces(["12345678\n"]) == ["12345678"])
    }
}

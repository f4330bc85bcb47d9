import DiffcastEngine
import DiffcastHTTP
import Testing

@testable import DiffcastServer

/// A fan-out frames an event once per transport and shares the frame: the frames are checked
/// against RFC 6455 and the SSE format written out by hand, and built only once.
@Suite struct FramedEventTests {
    let line =
        Array(#"{"event":"changeset","collection":"feed","epoch":"1bd960a5088193f7","version":42,"#.utf8)
        + Array(repeating: UInt8(ascii: "x"), count: 200) + Array("}\n".utf8)

    @Test func everyTransportGetsItsFrameBuiltOnce() {
        let event = FramedEvent(SharedBytes(line), webSocketFramer: WebSocketCodec(maximumMessageBytes: 1))
        let body = Array(line.dropLast())
        // A server's text frame: FIN and opcode 1, then a 16-bit length (126..65535), no mask.
        let frame = [0x81, 126, UInt8(body.count >> 8), UInt8(body.count & 0xff)] + body
        #expect(event.asWebSocketFrame.bytes == frame)
        #expect(event.asWebSocketFrame === event.asWebSocketFrame)
        let sse = Array("id: 1bd960a5088193f7:42\nevent: changeset\ndata: ".utf8) + line + [UInt8(ascii: "\n")]
        #expect(event.asServerSentEvent.bytes == sse)
        #expect(event.asServerSentEvent === event.asServerSentEvent)
        #expect(event.line.bytes == line)
    }

    @Test func aCompactStreamGetsChangesetsWithoutTheirEnvelopeOnce() {
        let full =
            Array(
                #"{"event":"changeset","collection":"feed","epoch":"1bd960a5088193f7","from":41,"version":42,"items":{"inserted":[{"at":[0,41],"id":"x"}]},"digest":"00000000000000ff"}"#
                    .utf8) + [UInt8(ascii: "\n")]
        let event = FramedEvent(SharedBytes(full), webSocketFramer: WebSocketCodec(maximumMessageBytes: 1))
        let sse =
            "id: 1bd960a5088193f7:42\n"
            + #"data: {"event":"changeset","version":42,"items":{"inserted":[{"at":[0,41],"id":"x"}]},"digest":"00000000000000ff"}"#
            + "\n\n"
        #expect(String(decoding: event.asCompactServerSentEvent.bytes, as: UTF8.self) == sse)
        #expect(event.asCompactServerSentEvent === event.asCompactServerSentEvent)
        let body = Array(
            #"{"event":"changeset","collection":"feed","version":42,"items":{"inserted":[{"at":[0,41],"id":"x"}]},"digest":"00000000000000ff"}"#
                .utf8)
        // 126 to 65,535 bytes: a 16-bit length.
        #expect(event.asCompactWebSocketFrame.bytes == [0x81, 126, 0, UInt8(body.count)] + body)
        #expect(body.count == 128)
        #expect(event.asCompactWebSocketFrame === event.asCompactWebSocketFrame)
        // The full forms are unchanged beside them.
        #expect(event.asServerSentEvent.bytes.starts(with: Array("id: 1bd960a5088193f7:42\nevent: changeset\n".utf8)))
        #expect(event.asWebSocketFrame.bytes == [0x81, 126, 0, UInt8(full.count - 1)] + full.dropLast())
    }

    @Test func aCompactStreamGetsEveryOtherEventInFull() {
        let snapshot =
            Array(
                #"{"event":"snapshot","collection":"feed","epoch":"1bd960a5088193f7","version":3,"sections":[],"digest":"0000000000000000"}"#
                    .utf8) + [UInt8(ascii: "\n")]
        for line in [snapshot, Array("{\"event\":\"dropped\",\"collection\":\"feed\"}\n".utf8)] {
            let event = FramedEvent(SharedBytes(line), webSocketFramer: WebSocketCodec(maximumMessageBytes: 1))
            #expect(event.asCompactServerSentEvent === event.asServerSentEvent)
            #expect(event.asCompactWebSocketFrame === event.asWebSocketFrame)
        }
    }

    @Test func aClosingWebSocketMaySendNothingMore() {
        let codec = WebSocketCodec(maximumMessageBytes: 100)
        #expect(codec.maySend)
        // A masked close frame from the client (code 1000): the codec answers it and closes.
        let close: [UInt8] = [0x88, 0x82, 0, 0, 0, 0, 0x03, 0xe8]
        let received = close.withUnsafeBytes { codec.feed($0) }
        #expect(received.isFinished && !received.reply.isEmpty)
        #expect(!codec.maySend)
    }
}

import DiffcastCore
import DiffcastWire
import Foundation
import Testing

@testable import DiffcastHTTP

@Suite struct HTTPRequestReaderTests {
    private func feed(_ reader: HTTPRequestReader, _ text: String) -> HTTPRequestReader.Output {
        Array(text.utf8).withUnsafeBytes { reader.feed($0) }
    }

    /// Requests come out whole however the bytes are cut, pipelined ones in order, with their
    /// headers (an empty value too) and bodies.
    @Test func requestsComeOutWholeHoweverTheBytesAreCut() {
        let text =
            "POST /v1/collections/a%2Fb?x=1&y=%C3%A9 HTTP/1.1\r\nHost: h\r\nX-Empty:\r\nContent-Length: 5\r\n\r\nhello"
            + "GET /v1/collections HTTP/1.1\r\nConnection: close\r\n\r\n"
        for cut in [1, 2, 7, 1000] {
            let reader = HTTPRequestReader()
            var requests: [HTTPRequest] = []
            let bytes = Array(text.utf8)
            for start in stride(from: 0, to: bytes.count, by: cut) {
                let output = bytes[start..<min(start + cut, bytes.count)].withUnsafeBytes { reader.feed($0) }
                #expect(output.failure == nil)
                requests += output.requests
            }
            #expect(requests.count == 2, "cut \(cut)")
            guard requests.count == 2 else { continue }
            #expect(requests[0].method == "POST" && requests[0].body == Array("hello".utf8))
            #expect(requests[0].headers.map(\.name) == ["host", "x-empty", "content-length"])
            #expect(requests[0].header("x-empty") == "" && requests[0].keepAlive)
            #expect(requests[0].path == "/v1/collections/a%2Fb")
            #expect(requests[0].query == ["x": "1", "y": "é"])
            #expect(requests[1].method == "GET" && !requests[1].keepAlive)
        }
    }

    @Test func limitsAndMalformedBytesAreFailuresWithTheirStatus() {
        let long = HTTPRequestReader(maximumHeadBytes: 64)
        #expect(feed(long, "GET /" + String(repeating: "a", count: 100) + " HTTP/1.1\r\n\r\n").failure?.status == 431)
        let large = HTTPRequestReader(maximumBodyBytes: 4)
        #expect(feed(large, "POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello").failure?.status == 413)
        let garbage = HTTPRequestReader()
        let output = feed(garbage, "GET / HTTP/1.1\r\n\r\nNOT HTTP\r\n\r\n")
        #expect(output.requests.count == 1, "the request before the garbage is kept")
        #expect(output.failure?.status == 400)
    }

    @Test func theBytesAfterAnUpgradeAreHandedBack() {
        let reader = HTTPRequestReader()
        let output = feed(
            reader,
            "GET /v1/ws HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: k\r\n\r\n\u{81}\u{05}"
        )
        #expect(output.requests.first?.isUpgrade == true)
        #expect(output.upgradeBytes == [0xC2, 0x81, 0x05])
    }
}

@Suite struct ServerSentEventsTests {
    /// The prefix is read from the event line the daemon encodes, for every kind of event.
    @Test func idAndEventComeFromTheEncodedLine() {
        var document = Document()
        let base = document.snapshot
        try? document.apply(.appendSections([SectionOutline(id: "s", items: [Item(id: "a")])]))
        let changeset = WireEncoder.changesetEvent(
            collection: "feed", epoch: "1bd960a5088193f7", from: 41, to: 42, changeset: document.changeset(since: base),
            digest: Digest(of: document.snapshot))
        let snapshot = WireEncoder.snapshotEvent(
            collection: "feed", epoch: "1bd960a5088193f7", version: 7, snapshot: document.snapshot)
        let prefix = { (line: [UInt8]) in String(decoding: line.withUnsafeBytes(ServerSentEvents.prefix), as: UTF8.self)
        }
        #expect(prefix(changeset) == "id: 1bd960a5088193f7:42\nevent: changeset\ndata: ")
        #expect(prefix(snapshot) == "id: 1bd960a5088193f7:7\nevent: snapshot\ndata: ")
        #expect(prefix(WireEncoder.droppedEvent(collection: "feed")) == "event: dropped\ndata: ")
    }

    @Test func aResumePointIsEpochColonVersion() {
        #expect(ServerSentEvents.resumePoint("1bd960a5088193f7:42")! == ("1bd960a5088193f7", 42))
        for bad in ["", ":", "x:1", "1bd9:", "1bd9:-1", "1bd9:1:2", "1bd9:18446744073709551616"] {
            #expect(ServerSentEvents.resumePoint(bad) == nil, "\(bad)")
        }
    }
}

@Suite struct WebSocketCodecTests {
    /// RFC 6455 section 1.3's example handshake.
    @Test func theAcceptValueIsTheRFCsExample() {
        #expect(WebSocketCodec.acceptValue(forKey: "dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    }

    /// A masked client frame, as a browser sends it.
    private func clientFrame(_ payload: [UInt8], opcode: UInt8 = 0x1, final: Bool = true) -> [UInt8] {
        let mask: [UInt8] = [0x37, 0xFA, 0x21, 0x3D]
        var frame: [UInt8] = [(final ? 0x80 : 0) | opcode]
        if payload.count < 126 {
            frame.append(0x80 | UInt8(payload.count))
        } else {
            frame += [0x80 | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        }
        frame += mask
        frame += payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
        return frame
    }

    @Test func messagesArriveWholeAcrossFramesAndFeeds() {
        let codec = WebSocketCodec(maximumMessageBytes: 1 << 20)
        let line = Array(#"{"op":"get","collection":"feed"}"#.utf8)
        let long = Array(repeating: UInt8(ascii: "x"), count: 300)
        let bytes =
            clientFrame(line) + clientFrame(Array(long.prefix(100)), final: false)
            + clientFrame(Array(long.dropFirst(100)), opcode: 0x0)
        var messages: [[UInt8]] = []
        for byte in bytes {
            let received = [byte].withUnsafeBytes { codec.feed($0) }
            #expect(!received.isFinished)
            messages += received.messages
        }
        #expect(messages == [line, long])
    }

    @Test func aPingIsAnsweredAndACloseFinishes() {
        let codec = WebSocketCodec(maximumMessageBytes: 1 << 20)
        let pong = clientFrame(Array("hi".utf8), opcode: 0x9).withUnsafeBytes { codec.feed($0) }
        #expect(pong.reply == [0x8A, 0x02] + Array("hi".utf8))
        let close = clientFrame([0x03, 0xE8], opcode: 0x8).withUnsafeBytes { codec.feed($0) }
        #expect(close.isFinished && close.reply.first == 0x88)
    }

    @Test func aTooLongMessageClosesWith1009() {
        let codec = WebSocketCodec(maximumMessageBytes: 10)
        let received = clientFrame(Array(repeating: 0x61, count: 11)).withUnsafeBytes { codec.feed($0) }
        #expect(received.messages.isEmpty)
        #expect(received.reply.prefix(4) == [0x88, 0x02, 0x03, 0xF1])
    }

    @Test func aLineBecomesOneTextFrameWithoutItsNewline() {
        let codec = WebSocketCodec(maximumMessageBytes: 10)
        let frame = Array("{\"ok\":true}\n".utf8).withUnsafeBytes { codec.frame($0) }
        #expect(frame == [0x81, 11] + Array("{\"ok\":true}".utf8))
    }
}

@Suite struct HTTPRouterTests {
    let open = HTTPRouter(allowedOrigins: [])

    @Test func pathsBecomeRequestLines() {
        #expect(
            open.route(HTTPRequest(method: "GET", target: "/v1/collections/a%2Fb"))
                == .requests([Array(#"{"op":"get","collection":"a/b"}"#.utf8)], batch: false))
        #expect(
            open.route(HTTPRequest(method: "POST", target: "/v1/collections/c", body: Array(#"{"op":"drop"}"#.utf8)))
                == .requests([Array(#"{"op":"drop","collection":"c"}"#.utf8)], batch: false))
        #expect(
            open.route(
                HTTPRequest(
                    method: "GET", target: "/v1/collections/c/events?since=3&epoch=ab",
                    headers: [("last-event-id", "ff:9")]))
                == .eventStream(
                    subscribe: Array(#"{"op":"subscribe","collection":"c","since":9,"epoch":"ff"}"#.utf8), form: .full))
    }

    @Test func compactAsksForCompactChangesetsAndAnythingElseIsRefused() {
        let subscribe = Array(#"{"op":"subscribe","collection":"c"}"#.utf8)
        for (value, form) in [("1", EventForm.compact), ("true", .compact), ("0", .full), ("false", .full)] {
            #expect(
                open.route(HTTPRequest(method: "GET", target: "/v1/collections/c/events?compact=\(value)"))
                    == .eventStream(subscribe: subscribe, form: form))
            let upgrade = HTTPRequest(
                method: "GET", target: "/v1/ws?compact=\(value)",
                headers: [
                    ("upgrade", "websocket"), ("connection", "Upgrade"), ("sec-websocket-version", "13"),
                    ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
                ], isUpgrade: true)
            guard case .webSocket(_, let chosen) = open.route(upgrade) else {
                Issue.record("no upgrade for compact=\(value)")
                continue
            }
            #expect(chosen == form)
        }
        for target in ["/v1/collections/c/events?compact=yes", "/v1/ws?compact=", "/v1/collections/c/events?compact=2"]
        {
            guard case .respond(let response) = open.route(HTTPRequest(method: "GET", target: target)) else {
                Issue.record("\(target) was not refused")
                continue
            }
            #expect(response.status == 400)
            #expect(String(decoding: response.body, as: UTF8.self).contains("compact is 1"))
        }
    }

    @Test func aTokenIsTakenFromTheHeaderElseTheQuery() {
        func token(_ target: String, _ headers: [(String, String)] = []) -> String? {
            HTTPRouter.presentedToken(HTTPRequest(method: "GET", target: target, headers: headers))
        }
        #expect(token("/v1/collections") == nil)
        #expect(token("/v1/collections", [("authorization", "Bearer abc.def.ghi")]) == "abc.def.ghi")
        #expect(token("/v1/collections", [("authorization", "bearer x")]) == "x")
        #expect(token("/v1/collections?token=q") == "q")
        #expect(token("/v1/collections?token=q", [("authorization", "Bearer h")]) == "h")
        #expect(token("/v1/collections", [("authorization", "Basic dTpw")]) == nil)
    }
}

/// The daemon serves the files of clients/js as they are.
@Suite struct WebAssetsTests {
    @Test func theEmbeddedFilesAreTheFilesOfClientsJS() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let script = try Data(contentsOf: root.appendingPathComponent("clients/js/diffcast.js"))
        let page = try Data(contentsOf: root.appendingPathComponent("clients/js/index.html"))
        #expect(WebAssets.script == Array(script), "run scripts/embed-web.py")
        #expect(WebAssets.page == Array(page), "run scripts/embed-web.py")
    }
}

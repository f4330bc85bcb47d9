import DiffcastCore
import DiffcastTestDaemon
import DiffcastTestSupport
import DiffcastWire
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The real daemon over a real Unix socket.
@Suite(.serialized) struct DaemonTests {
    @Test func aSubscriberMirrorsEveryWriteExactly() throws {
        let daemon = try Daemon()
        let subscriber = try Client(path: daemon.socketPath)
        let publisher = try Client(path: daemon.socketPath)
        #expect(try subscriber.request(#"subscribe feed"#)["version"]?.int == 0)
        var mirror = StrictMirror()
        try mirror.feed(try subscriber.event())
        let writes = [
            #"{"op":"apply","collection":"feed","sections":[{"id":"today","items":[{"id":"t1","data":{"likes":1}},"t2"]},{"id":"later","items":["t3",4]}]}"#,
            #"{"op":"update_items","collection":"feed","items":[{"id":"t1","data":{"likes":2}}]}"#,
            #"{"op":"move_item","collection":"feed","item":"t3","before":"t1"}"#,
            #"{"op":"delete_sections","collection":"feed","sections":["later"]}"#,
            #"{"op":"insert_sections","collection":"feed","after":"today","sections":[{"id":"x","items":["4"]}]}"#,
        ]
        var version = 0
        for write in writes {
            let response = try publisher.request(write)
            #expect(response.isOK, "\(response.canonicalText)")
            version = response["version"]?.int ?? -1
            while (mirror.version ?? 0) < UInt64(version) { try mirror.feed(try subscriber.event()) }
        }
        #expect(version == writes.count)
        let state = try publisher.request("get feed")
        #expect(try EventDecoder.outline(state["sections"]) == mirror.sections)
        #expect(mirror.sections.map(\.id) == ["today", "x"])
        #expect(mirror.sections[0].items.map(\.id) == ["t3", "t1", "t2"])
    }

    /// Random writes through the real daemon; every changeset a subscriber receives — live, and
    /// catch-ups after it re-subscribes with `since` — is checked by the tests' strict applier
    /// and move law against the states `get` reports, and every digest against the reference.
    @Test func everyChangesetFromTheDaemonPassesTheStrictOracle() throws {
        let daemon = try Daemon()
        let writer = try Client(path: daemon.socketPath)
        var rng = SplitMix64(seed: 314)
        func state() throws -> (version: Int, plain: PlainState, digest: String?) {
            let got = try writer.request("get o")
            let outline = try EventDecoder.outline(got["sections"])
            let snapshot = Snapshot(
                uncheckedSections: outline.map { Section(id: $0.id, data: $0.data, items: $0.items) })
            return (got["version"]?.int ?? -1, plain(snapshot), got["digest"]?.string)
        }
        #expect(try writer.request(#"append_sections o {"sections":[{"id":"A"},{"id":"B"},{"id":"C"}]}"#).isOK)
        var states: [Int: PlainState] = [:]
        var checked = 0
        for round in 0..<40 {
            let subscriber = try Client(path: daemon.socketPath)
            let before = try state()
            states[before.version] = before.plain
            #expect(before.digest == ReferenceDigest.of(before.plain))
            let since = states.keys.filter { $0 <= before.version }.randomElement(using: &rng) ?? before.version
            _ = try subscriber.request(#"subscribe o {"since":\#(since)}"#)
            var held = (version: since, plain: states[since] ?? [])
            for _ in 0..<Int.random(in: 1...6, using: &rng) {
                let item = "i\(Int.random(in: 0..<25, using: &rng))"
                let other = "i\(Int.random(in: 0..<25, using: &rng))"
                let section = ["A", "B", "C"].randomElement(using: &rng) ?? "A"
                let line =
                    switch Int.random(in: 0..<7, using: &rng) {
                    case 0: #"append_items o {"section":"\#(section)","items":[{"id":"\#(item)","data":\#(round)}]}"#
                    case 1: #"move_item o {"item":"\#(item)","after":"\#(other)"}"#
                    case 2: #"delete_items o {"items":["\#(item)"]}"#
                    case 3: #"update_items o {"items":[{"id":"\#(item)","data":{"r":\#(round)}}]}"#
                    case 4: #"move_section o {"section":"\#(section)","before":"A"}"#
                    case 5: #"insert_items o {"items":["\#(item)"],"before":"\#(other)"}"#
                    default:
                        #"batch o {"ops":[{"op":"move_item","item":"\#(item)","before":"\#(other)"},{"op":"append_items","section":"C","items":["n\#(round)"]}]}"#
                    }
                _ = try writer.request(line)
                let now = try state()
                states[now.version] = now.plain
            }
            let after = try state()
            while held.version < after.version {
                let event = try subscriber.event()
                if event["event"] == .string("snapshot") {
                    held = (event["version"]?.int ?? -1, states[event["version"]?.int ?? -1] ?? [])
                    continue
                }
                let to = event["version"]?.int ?? -1
                guard let expected = states[to] else {
                    Issue.record("round \(round): an event to version \(to), which get never reported")
                    break
                }
                let changeset = try EventDecoder.changeset(event)
                do {
                    try checkStrictly(changeset, from: held.plain, to: expected)
                } catch {
                    Issue.record("round \(round), \(held.version)->\(to): \(error)")
                }
                #expect(event["digest"]?.string == ReferenceDigest.of(expected))
                held = (to, expected)
                checked += 1
            }
            subscriber.close()
        }
        #expect(checked > 30, "too few changesets checked to prove anything")
    }

    @Test func aDataChangeArrivesAsOneUpdate() throws {
        let daemon = try Daemon()
        let client = try Client(path: daemon.socketPath)
        _ = try client.request(#"apply likes {"sections":[{"id":"s","items":[{"id":"t1","data":{"likes":1000}}]}]}"#)
        _ = try client.request("subscribe likes")
        _ = try client.event()
        let response = try client.request(#"update_items likes {"items":[{"id":"t1","data":{"likes":2000}}]}"#)
        let event = try client.event()
        #expect(event["version"]?.int == response["version"]?.int)
        #expect(event["items"]?["updated"]?.array.count == 1)
        #expect(event["items"]?["inserted"] == nil && event["items"]?["deleted"] == nil)
    }

    /// A subscribed connection that pipelines writes without reading falls behind its
    /// unsent-bytes limit and is caught up later; still no response may carry a version whose
    /// event the connection has not been sent.
    @Test func readYourWritesHoldsForAConnectionThatIsBehind() throws {
        let daemon = try Daemon(arguments: ["--max-unsent-bytes", "65536"])
        let client = try Client(path: daemon.socketPath, receiveBufferBytes: 4096)
        #expect(try client.request(#"append_sections pl {"sections":[{"id":"s"}]}"#).isOK)
        _ = try client.request("subscribe pl")
        var mirror = StrictMirror()
        try mirror.feed(try client.event())
        let blob = String(repeating: "x", count: 200)
        var lines = ""
        for index in 0..<10_000 {
            switch index % 10 {
            case 3: lines += #"update_items pl {"items":[{"id":"k\#(index - 1)","data":\#(index)}]}"# + "\n"
            case 7: lines += "ping\n"
            default: lines += #"append_items pl {"items":[{"id":"k\#(index)","data":"\#(blob)"}]}"# + "\n"
            }
        }
        let pipelined = Array(lines.utf8)
        let sender = Thread { try? client.sendRaw(pipelined) }
        sender.start()
        // Not reading until the daemon stops reading this connection (its unsent bytes are past
        // the limit, so its subscription is behind): the count of writes applied stands still.
        let observer = try Client(path: daemon.socketPath)
        var counts: [Int] = []
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            counts.append(try observer.request("stats")["writes_applied"]?.int ?? 0)
            if counts.count >= 4, counts.suffix(4).allSatisfy({ $0 == counts.last }), counts.last ?? 0 > 100 { break }
            Thread.sleep(forTimeInterval: 0.1)
        }
        var responses = 0
        var early = 0
        var catchUps = 0
        while responses < 10_000, let line = try client.readLine(timeout: 30) {
            if line["event"] != nil {
                if line["from"] != nil, let from = line["from"]?.int, let to = line["version"]?.int, to > from + 1 {
                    catchUps += 1
                }
                try mirror.feed(line)
                continue
            }
            responses += 1
            #expect(line.isOK, "\(line.canonicalText)")
            if let version = line["version"]?.int, version > Int(mirror.version ?? 0) { early += 1 }
        }
        #expect(responses == 10_000)
        #expect(early == 0, "responses ahead of their event")
        #expect(catchUps > 0, "the connection never fell behind: the test proves nothing")
        let state = try client.request("get pl")
        #expect(state["version"]?.int == Int(mirror.version ?? 0))
        #expect(state["digest"]?.string == ReferenceDigest.of(mirror.state))
    }

    @Test func readYourWritesTheEventComesBeforeTheAcknowledgement() throws {
        let daemon = try Daemon()
        let client = try Client(path: daemon.socketPath)
        _ = try client.request("subscribe mine")
        _ = try client.event()
        try client.send(#"append_sections mine {"sections":[{"id":"s"}]}"#)
        let first = try client.readLine()
        #expect(first?["event"] == .string("changeset"))
        #expect(try client.readLine()?["ok"] == .bool(true))
    }

    @Test func pipelinedWritesAreCoalescedAndAnsweredInOrder() throws {
        let daemon = try Daemon()
        let client = try Client(path: daemon.socketPath)
        _ = try client.request(#"append_sections burst {"sections":[{"id":"s"}]}"#)
        let count = 2000
        var payload = ""
        for index in 0..<count {
            payload += #"{"op":"append_items","collection":"burst","items":["x\#(index)"],"id":\#(index)}"# + "\n"
        }
        try client.sendRaw(Array(payload.utf8))
        var versions: [Int] = []
        for index in 0..<count {
            let response = try client.response()
            #expect(response["id"]?.int == index)
            versions.append(response["version"]?.int ?? -1)
        }
        #expect(versions == versions.sorted())
        #expect(Set(versions).count <= count / 10)
        let state = try client.request("get burst")
        #expect(state["sections"]?.array.first?["items"]?.array.count == count)
    }

    @Test func badInputGetsAnErrorAndTheConnectionLivesOn() throws {
        let daemon = try Daemon(arguments: ["--max-line-bytes", "4096"])
        let client = try Client(path: daemon.socketPath)
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            var junk = (0..<Int.random(in: 1...200, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            junk.removeAll { $0 == UInt8(ascii: "\n") }
            junk.append(UInt8(ascii: "\n"))
            try client.sendRaw(junk)
            if junk.allSatisfy({ [0x20, 0x09, 0x0d, 0x0a].contains($0) }) { continue }
            let response = try client.response()
            #expect(response["ok"] == .bool(false))
        }
        try client.sendRaw(Array(String(repeating: "p", count: 10_000).utf8) + [10])
        #expect(try client.response()["error"]?["code"] == .string("line_too_long"))
        #expect(try client.request("ping").isOK)
        let vanishing = try Client(path: daemon.socketPath)
        try vanishing.sendRaw(Array(#"{"op":"append_items","collection":"half","it"#.utf8))
        vanishing.close()
        #expect(try Client(path: daemon.socketPath).request("ping").isOK)
    }

    @Test func aRejectedWriteChangesNothingAndNamesTheCulprit() throws {
        let daemon = try Daemon()
        let client = try Client(path: daemon.socketPath)
        #expect(try client.request(#"append_items none {"items":["a"]}"#)["error"]?["code"] == .string("no_section"))
        #expect(try client.request("get none")["error"]?["code"] == .string("unknown_collection"))
        _ = try client.request(#"apply c {"sections":[{"id":"s","items":["a"]}]}"#)
        let duplicate = try client.request(#"append_items c {"items":["b","a"]}"#)
        #expect(duplicate["error"]?["code"] == .string("duplicate_identifier"))
        #expect(duplicate["error"]?["message"]?.string?.contains("'a'") == true)
        let state = try client.request("get c")
        #expect(state["version"]?.int == 1)
        #expect(state["sections"]?.array.first?["items"]?.array == [.string("a")])
    }

    /// A client that waits for each answer is served on the loop thread, one that pipelines
    /// thousands by the apply worker. Writing to one collection at once, they still make one
    /// history: a subscriber sees every version in order, each digest right, and ends holding
    /// every item; each writer's answers come in its own order with rising versions.
    @Test(arguments: 0..<3) func waitingAndPipeliningWritersMakeOneHistory(round: Int) throws {
        let daemon = try Daemon()
        let waiting = try Client(path: daemon.socketPath)
        _ = try waiting.request(#"append_sections mix {"sections":[{"id":"s"}]}"#)
        let subscriber = try Client(path: daemon.socketPath)
        _ = try subscriber.request("subscribe mix")
        let pipelining = try Client(path: daemon.socketPath)
        let pipelined = 3_000
        let lines = (0..<pipelined).map { #"{"op":"append_items","collection":"mix","items":["p\#($0)"]}"# + "\n" }
        let sender = Thread { try? pipelining.sendRaw(Array(lines.joined().utf8)) }
        sender.start()
        var waitingVersions: [Int] = []
        for index in 0..<300 {
            let answer = try waiting.request(#"append_items mix {"items":["w\#(index)"]}"#)
            waitingVersions.append(answer["version"]?.int ?? -1)
        }
        var pipelinedVersions: [Int] = []
        for _ in 0..<pipelined { pipelinedVersions.append(try pipelining.response()["version"]?.int ?? -1) }
        #expect(waitingVersions == waitingVersions.sorted() && !waitingVersions.contains(-1))
        #expect(pipelinedVersions == pipelinedVersions.sorted() && !pipelinedVersions.contains(-1))
        let last = UInt64(max(waitingVersions.last ?? 0, pipelinedVersions.last ?? 0))
        var mirror = StrictMirror()
        while (mirror.version ?? 0) < last { try mirror.feed(try subscriber.event()) }
        let items = mirror.sections.first?.items.map(\.id) ?? []
        #expect(items.count == 3_300)
        let written = (0..<pipelined).map { Identifier("p\($0)") } + (0..<300).map { Identifier("w\($0)") }
        #expect(Set(items) == Set(written))
        // Each writer's items stand in the order it wrote them.
        #expect(items.filter { $0.text.hasPrefix("w") } == (0..<300).map { Identifier("w\($0)") })
        #expect(items.filter { $0.text.hasPrefix("p") } == (0..<pipelined).map { Identifier("p\($0)") })
    }

    /// More subscribers than one loop iteration writes (`Server.writeTurns`: a fifth of those
    /// waiting, at least 64), while writes arrive one at a time and in a burst: each subscriber
    /// gets every version in order (the mirror checks each `from` and digest) and ends holding
    /// what `get` reports. With two I/O threads the slices are written by the loop and a helper
    /// together. (That answers are not held behind the turns is a matter of latency, measured by
    /// `DiffcastBenchmarks pipeline`, not asserted here.)
    @Test(arguments: [1, 2]) func subscribersWrittenInTurnsEachGetEveryVersionInOrder(ioThreads: Int) throws {
        let daemon = try Daemon(arguments: ["--io-threads", "\(ioThreads)"])
        let publisher = try Client(path: daemon.socketPath)
        _ = try publisher.request(#"append_sections many {"sections":[{"id":"s"}]}"#)
        var subscribers: [(client: Client, mirror: StrictMirror)] = []
        for index in 0..<300 {
            // Every tenth reads through a small buffer: its writes are partial, and the rest of
            // each goes out later.
            let client = try Client(path: daemon.socketPath, receiveBufferBytes: index % 10 == 0 ? 4096 : nil)
            _ = try client.request("subscribe many")
            var mirror = StrictMirror()
            try mirror.feed(try client.event())
            subscribers.append((client, mirror))
        }
        for index in 0..<30 {
            #expect(try publisher.request(#"append_items many {"items":[{"id":"a\#(index)","data":\#(index)}]}"#).isOK)
        }
        var burst = ""
        let padding = String(repeating: "p", count: 300)
        for index in 0..<200 {
            burst +=
                #"{"op":"update_items","collection":"many","items":[{"id":"a\#(index % 30)","data":{"n":\#(index),"pad":"\#(padding)"}}]}"#
                + "\n"
        }
        try publisher.sendRaw(Array(burst.utf8))
        var last = 0
        for _ in 0..<200 { last = try publisher.response()["version"]?.int ?? -1 }
        let state = try publisher.request("get many")
        #expect(state["version"]?.int == last)
        for index in subscribers.indices {
            while (subscribers[index].mirror.version ?? 0) < UInt64(last) {
                try subscribers[index].mirror.feed(try subscribers[index].client.event())
            }
            #expect(subscribers[index].mirror.version == UInt64(last))
            #expect(try EventDecoder.outline(state["sections"]) == subscribers[index].mirror.sections)
        }
    }

    /// Subscribers that read nothing for a while, with the writer threads on: their sockets
    /// fill, a helper's write takes part of what was queued, and the loop hands the rest to
    /// libuv. Each subscriber still gets every byte once, in order.
    @Test func writerThreadsLeaveTheRestOfAPartialWriteToTheLoop() throws {
        let daemon = try Daemon(arguments: ["--io-threads", "2"])
        let publisher = try Client(path: daemon.socketPath)
        _ = try publisher.request(#"append_sections big {"sections":[{"id":"s","items":["a"]}]}"#)
        var subscribers: [(client: Client, mirror: StrictMirror)] = []
        for _ in 0..<40 {
            // A small receive buffer: each version's event is more than the socket takes at once,
            // so the writes of every slice, the helper thread's too, are partial.
            let client = try Client(path: daemon.socketPath, receiveBufferBytes: 4096)
            _ = try client.request("subscribe big")
            var mirror = StrictMirror()
            try mirror.feed(try client.event())
            subscribers.append((client, mirror))
        }
        // 120 appends of 4 KB in a burst, coalesced into versions whose events are larger than
        // what a subscriber's socket takes at once.
        let padding = String(repeating: "q", count: 4096)
        var burst = ""
        for index in 0..<120 {
            burst +=
                #"{"op":"append_items","collection":"big","items":[{"id":"b\#(index)","data":"\#(padding)"}]}"# + "\n"
        }
        try publisher.sendRaw(Array(burst.utf8))
        var last = 0
        for _ in 0..<120 { last = try publisher.response()["version"]?.int ?? -1 }
        let burstState = try publisher.request("get big")
        for index in subscribers.indices {
            while (subscribers[index].mirror.version ?? 0) < UInt64(last) {
                try subscribers[index].mirror.feed(try subscribers[index].client.event())
            }
            #expect(try EventDecoder.outline(burstState["sections"]) == subscribers[index].mirror.sections)
        }
        // Then one version whose event is larger than a socket's whole send buffer (about 200 KB),
        // written to 40 drained sockets at once: every write of the slice is partial whatever
        // the timing, and what the kernel took must not be sent again. The 40 copies are
        // compared byte for byte, and the first is checked by its subscriber's mirror.
        let large = String(repeating: "L", count: 300_000)
        _ = try publisher.request(#"append_items big {"items":[{"id":"large","data":"\#(large)"}]}"#)
        var copies: [[UInt8]] = []
        for index in subscribers.indices {
            copies.append(try #require(try subscribers[index].client.readLineBytes(timeout: 30)))
        }
        #expect(copies.allSatisfy { $0 == copies[0] }, "a subscriber got other bytes than the others")
        try subscribers[0].mirror.feed(try JSONParser.parse(copies[0]))
        let state = try publisher.request("get big")
        #expect(try EventDecoder.outline(state["sections"]) == subscribers[0].mirror.sections)
    }

    /// A subscriber that reads slowly has its events go out in pieces: a `send` the kernel takes
    /// in part, the rest through a `uv_write` that finishes later. A publisher that waits for each
    /// answer has its versions sent at once to the subscribers with nothing to write; one whose
    /// last event is still on its way must get the next after it, whole. Each event spans two
    /// of the kernel's buffers for a Unix socket (at most about 36 KB each), so that a send that
    /// meets a full socket is often taken in part.
    @Test func aSubscriberThatReadsSlowlyGetsEveryEventWholeAndInOrder() throws {
        let daemon = try Daemon()
        let publisher = try Client(path: daemon.socketPath)
        #expect(try publisher.request(#"append_sections trickle {"sections":[{"id":"s"}]}"#).isOK)
        let slow = try Client(path: daemon.socketPath, receiveBufferBytes: 4096)
        _ = try slow.request("subscribe trickle")
        var mirror = StrictMirror()
        try mirror.feed(try slow.event())
        let blob = String(repeating: "y", count: 50_000)
        let writes = 60
        let writer = Thread {
            for index in 0..<writes {
                _ = try? publisher.request(#"append_items trickle {"items":[{"id":"i\#(index)","data":"\#(blob)"}]}"#)
            }
        }
        writer.start()
        while (mirror.version ?? 0) < UInt64(writes + 1) {
            try mirror.feed(try slow.event())
            Thread.sleep(forTimeInterval: 0.001)
        }
        // The whole state is 3 MB: a debug daemon takes seconds to encode it.
        let observer = try Client(path: daemon.socketPath)
        try observer.send("get trickle")
        let state = try #require(try observer.readLine(timeout: 120))
        #expect(state["version"]?.int == writes + 1)
        #expect(state["digest"]?.string == ReferenceDigest.of(mirror.state))
        #expect(mirror.sections.first?.items.count == writes)
    }

    /// An event larger than the socket's send buffer leaves its rest to a `uv_write`, which
    /// waits until the kernel calls the socket writable (three quarters of its buffer read). A
    /// version published while the reader has made room, but not that much, must wait behind
    /// that rest, though the connection has nothing queued: sent at once, it would land in the
    /// middle of the first event.
    @Test func anEventWaitsBehindTheRestOfAnUnfinishedWrite() throws {
        let daemon = try Daemon()
        let publisher = try Client(path: daemon.socketPath)
        #expect(try publisher.request(#"append_sections big {"sections":[{"id":"s"}]}"#).isOK)
        let reader = try Client(path: daemon.socketPath)
        _ = try reader.request("subscribe big")
        var mirror = StrictMirror()
        try mirror.feed(try reader.event())
        let huge = String(repeating: "z", count: 1_000_000)
        #expect(try publisher.request(#"append_items big {"items":[{"id":"huge","data":"\#(huge)"}]}"#).isOK)
        // The daemon's send of the event has returned, and its rest waits for a `uv_write`.
        Thread.sleep(forTimeInterval: 0.2)
        var received = try #require(try reader.readBytes())
        #expect(received.count < 1_000_000, "the whole event fit in the socket: the test proves nothing")
        #expect(try publisher.request(#"append_items big {"items":[{"id":"small","data":1}]}"#).isOK)
        while received.count(where: { $0 == UInt8(ascii: "\n") }) < 2, let more = try reader.readBytes() {
            received += more
        }
        for line in received.split(separator: UInt8(ascii: "\n")) {
            try mirror.feed(try JSONParser.parse(Array(line)))
        }
        #expect(mirror.version == 3 && mirror.sections.first?.items.map(\.id) == ["huge", "small"])
    }

    @Test func aSlowSubscriberCatchesUpWithoutHoldingUpOthers() throws {
        let daemon = try Daemon(arguments: ["--max-unsent-bytes", "65536"])
        let publisher = try Client(path: daemon.socketPath)
        _ = try publisher.request(#"append_sections slow {"sections":[{"id":"s"}]}"#)
        let slow = try Client(path: daemon.socketPath, receiveBufferBytes: 4096)
        _ = try slow.request("subscribe slow")
        let fast = try Client(path: daemon.socketPath)
        _ = try fast.request("subscribe slow")
        var fastMirror = StrictMirror()
        let blob = String(repeating: "x", count: 2000)
        var last = 0
        for round in 0..<40 {
            var batch = ""
            for index in 0..<20 {
                batch +=
                    #"{"op":"append_items","collection":"slow","items":[{"id":"r\#(round).\#(index)","data":"\#(blob)"}]}"#
                    + "\n"
            }
            try publisher.sendRaw(Array(batch.utf8))
            for _ in 0..<20 { last = try publisher.response()["version"]?.int ?? last }
            while (fastMirror.version ?? 0) < UInt64(last) { try fastMirror.feed(try fast.event()) }
        }
        var slowMirror = StrictMirror()
        while (slowMirror.version ?? 0) < UInt64(last) { try slowMirror.feed(try slow.event()) }
        #expect(slowMirror.sections == fastMirror.sections)
        #expect(slowMirror.sections.first?.items.count == 800)
        // It fell behind, so it was caught up with far fewer events than versions.
        #expect(slowMirror.changesetsApplied + slowMirror.snapshotsApplied < last)
    }

    @Test func theDisconnectPolicyClosesASlowSubscriberWithAnErrorLine() throws {
        let daemon = try Daemon(arguments: ["--max-unsent-bytes", "16384", "--slow-subscriber-policy", "disconnect"])
        let publisher = try Client(path: daemon.socketPath)
        _ = try publisher.request(#"append_sections d {"sections":[{"id":"s"}]}"#)
        let slow = try Client(path: daemon.socketPath, receiveBufferBytes: 4096)
        _ = try slow.request("subscribe d")
        let blob = String(repeating: "y", count: 4000)
        for index in 0..<300 {
            _ = try publisher.request(#"append_items d {"items":[{"id":"i\#(index)","data":"\#(blob)"}]}"#)
        }
        var lines: [JSONValue] = []
        while let line = try slow.readLine() { lines.append(line) }
        #expect(lines.last?["event"] == .string("error"))
        #expect(lines.last?["error"]?["code"] == .string("limit_exceeded"))
        #expect(try publisher.request("ping").isOK)
    }

    /// Memory is measured, so not under a sanitizer (its allocator keeps freed memory aside).
    @Test(.disabled(if: ProcessInfo.processInfo.environment["DIFFCAST_SANITIZER"] != nil))
    func aClientThatDoesNotReadItsAnswersIsNotReadEither() throws {
        let daemon = try Daemon(arguments: ["--max-unsent-bytes", "65536"])
        let flooder = try Client(path: daemon.socketPath)
        // Warmed up first, so what the first requests allocate once (tables, the apply
        // worker's thread and its malloc arena) is not counted as buffering.
        for _ in 0..<100 { #expect(try flooder.request("ping").isOK) }
        let baselineKilobytes = try residentKilobytes(of: daemon.pid)
        let count = 400_000
        let requests = Array(String(repeating: "ping\n", count: count).utf8)
        // Sent without blocking until the socket has taken nothing for 3 s: the daemon stops
        // reading once its answers back up, so the sender stalls for good after about 0.5 MB. A
        // daemon that kept reading takes the rest in bursts as it answers (a debug build, a
        // socket buffer every 1.5 s), all 2 MB, and holds 10 MB of answers.
        let flags = fcntl(flooder.descriptor, F_GETFL)
        _ = fcntl(flooder.descriptor, F_SETFL, flags | O_NONBLOCK)
        var sent = 0
        var lastProgress = Date()
        while sent < requests.count, Date().timeIntervalSince(lastProgress) < 3 {
            let taken = requests[sent...].withUnsafeBytes {
                Glibc.send(flooder.descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
            }
            if taken > 0 {
                sent += taken
                lastProgress = Date()
            } else {
                var poller = pollfd(fd: flooder.descriptor, events: Int16(POLLOUT), revents: 0)
                _ = poll(&poller, 1, 100)
            }
        }
        #expect(sent < requests.count / 2, "the daemon read \(sent) of \(requests.count) bytes without answers read")
        let grownKilobytes = try residentKilobytes(of: daemon.pid) - baselineKilobytes
        #expect(grownKilobytes < 10_000, "daemon RSS grew by \(grownKilobytes) kB")
        _ = fcntl(flooder.descriptor, F_SETFL, flags)
        let rest = Array(requests[sent...])
        let sender = Thread { try? flooder.sendRaw(rest) }
        sender.start()
        #expect(try Client(path: daemon.socketPath).request("ping").isOK)
        // Every answer is the same line, so the stream is compared in bulk with that line repeated
        // (memcmp against a pattern long enough for any chunk at any phase of the line).
        let pong = Array(#"{"ok":true,"op":"ping"}"#.utf8) + [UInt8(ascii: "\n")]
        let pattern = Array(repeating: pong, count: (1 << 16) / pong.count + 2).joined().map { $0 }
        var received = 0
        while received < count * pong.count {
            guard let bytes = try flooder.readBytes() else {
                Issue.record("end of stream after \(received / pong.count) of \(count) responses")
                return
            }
            let phase = received % pong.count
            let expected = pattern[phase..<min(pattern.count, phase + bytes.count)]
            let same =
                expected.count == bytes.count
                && bytes.withUnsafeBytes { got in
                    expected.withUnsafeBytes { want in
                        guard let got = got.baseAddress, let want = want.baseAddress else { return got.isEmpty }
                        return memcmp(got, want, bytes.count) == 0
                    }
                }
            guard same else {
                Issue.record("response \(received / pong.count): \(String(decoding: bytes.prefix(200), as: UTF8.self))")
                return
            }
            received += bytes.count
        }
        #expect(received == count * pong.count)
    }

    private func residentKilobytes(of pid: Int32) throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        return status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") }
            .flatMap { Int($0.split(separator: " ").dropFirst().first ?? "") } ?? 0
    }

    @Test func subscribingWithSinceGetsOneChangeset() throws {
        let daemon = try Daemon()
        let client = try Client(path: daemon.socketPath)
        let subscribed = try client.request("subscribe hist")
        var mirror = StrictMirror()
        try mirror.feed(try client.event())
        _ = try client.request("unsubscribe hist")
        for index in 0..<5 { _ = try client.request(#"append_sections hist {"sections":[{"id":"s\#(index)"}]}"#) }
        let epoch = subscribed["epoch"]?.string ?? ""
        let again = try client.request(#"subscribe hist {"since":0,"epoch":"\#(epoch)"}"#)
        #expect(again["version"]?.int == 5)
        let event = try client.event()
        #expect(event["event"] == .string("changeset") && event["from"]?.int == 0)
        try mirror.feed(event)
        #expect(mirror.sections.map(\.id) == ["s0", "s1", "s2", "s3", "s4"])
        _ = try client.request(#"subscribe hist {"since":0,"epoch":"another"}"#)
        #expect(try client.event()["event"] == .string("snapshot"))
    }

    @Test func dropTellsSubscribers() throws {
        let daemon = try Daemon()
        let client = try Client(path: daemon.socketPath)
        _ = try client.request(#"append_sections gone {"sections":[{"id":"s"}]}"#)
        let subscriber = try Client(path: daemon.socketPath)
        _ = try subscriber.request("subscribe gone")
        _ = try subscriber.event()
        #expect(try client.request("drop gone").isOK)
        #expect(try subscriber.event()["event"] == .string("dropped"))
        #expect(try client.request("drop gone")["error"]?["code"] == .string("unknown_collection"))
    }

    @Test func listAndStatsDescribeTheDaemon() throws {
        let daemon = try Daemon()
        let client = try Client(path: daemon.socketPath)
        _ = try client.request(#"apply l {"sections":[{"id":"s","items":["a","b"]}]}"#)
        _ = try client.request("subscribe l")
        let list = try client.request("list")
        let row = list["collections"]?.array.first { $0["name"] == .string("l") }
        #expect(row?["items"]?.int == 2 && row?["subscribers"]?.int == 1 && row?["version"]?.int == 1)
        let stats = try client.request("stats")
        #expect(stats["writes_applied"]?.int == 1)
        #expect(stats["connections"]?.int == 1)
    }
}

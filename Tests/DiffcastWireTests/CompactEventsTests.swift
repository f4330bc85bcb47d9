import DiffcastCore
import DiffcastWire
import Testing

/// A compact changeset is its full line without `epoch`, `from` and (when asked) `collection`,
/// every other member as it was and in its order: checked against golden lines written out by
/// hand, and, for changesets of every kind and awkward collection names, against the full line
/// parsed with those members taken out.
@Suite struct CompactEventsTests {
    private func compact(_ line: [UInt8], keepingCollection: Bool) -> String? {
        line.withUnsafeBytes { CompactEvents.changeset($0, keepingCollection: keepingCollection) }.map {
            String(decoding: $0, as: UTF8.self)
        }
    }

    private let append: [UInt8] = {
        var changeset = Changeset()
        changeset.items.inserted = [
            .init(at: ItemPath(0, 122), id: "i122", data: JSONText(canonical: #"{"text":"hi"}"#))
        ]
        return WireEncoder.changesetEvent(
            collection: "feed", epoch: "1bd960a5088193f7", from: 122, to: 123, changeset: changeset,
            digest: Digest(value: 0xabc))
    }()

    @Test func aSingleAppendLosesItsEnvelopeAndKeepsItsDigest() {
        #expect(
            compact(append, keepingCollection: false)
                == #"{"event":"changeset","version":123,"items":{"inserted":[{"at":[0,122],"id":"i122","data":{"text":"hi"}}]},"digest":"0000000000000abc"}"#
                + "\n")
        #expect(
            compact(append, keepingCollection: true)
                == #"{"event":"changeset","collection":"feed","version":123,"items":{"inserted":[{"at":[0,122],"id":"i122","data":{"text":"hi"}}]},"digest":"0000000000000abc"}"#
                + "\n")
    }

    @Test func everyChangesetKeepsAllButTheEstablishedMembers() throws {
        var changeset = Changeset()
        changeset.sections.inserted = [.init(at: 1, id: "s2", data: JSONText(canonical: "[1,2]"))]
        changeset.sections.moved = [.init(from: 0, to: 2, id: "s0")]
        changeset.items.deleted = [.init(at: ItemPath(0, 3), id: "gone")]
        changeset.items.moved = [.init(from: ItemPath(0, 1), to: ItemPath(2, 0), id: "m")]
        changeset.items.updated = [.init(at: ItemPath(2, 0), id: "m", data: JSONText(canonical: #""\"from\":1""#))]
        let window = WindowPlace(range: WindowRange(lower: 3, upper: 5, total: 9), isAnchored: true, anchor: "m")
        // Names with what a careless scan would stop at: quotes, backslashes, the members' names.
        let names = ["c", #"a"b"#, #"ends\"#, #"","epoch":"x","from":1,"version":"#, "é 🙂"]
        for name in names {
            for place in [nil, window] {
                let full = WireEncoder.changesetEvent(
                    collection: name, epoch: "0123456789abcdef", from: 7, to: 9, changeset: changeset, window: place,
                    digest: Digest(value: 99))
                guard case .object(let members) = try JSONParser.parse(full.dropLast()) else {
                    Issue.record("not an object")
                    continue
                }
                for keepingCollection in [false, true] {
                    let left: Set = keepingCollection ? ["epoch", "from"] : ["collection", "epoch", "from"]
                    let expected = JSONValue.object(members.filter { !left.contains($0.key) })
                    let text = try #require(compact(full, keepingCollection: keepingCollection))
                    #expect(text.hasSuffix("\n"))
                    #expect(try JSONParser.parse(Array(text.utf8).dropLast()) == expected, "\(name)")
                }
            }
        }
    }

    @Test func otherLinesAreNotCompacted() {
        let lines = [
            WireEncoder.snapshotEvent(collection: "c", epoch: "e", version: 3, snapshot: Snapshot()),
            WireEncoder.droppedEvent(collection: "c"),
            WireEncoder.revokedEvent(collection: "c", message: "expired"),
            WireEncoder.success(id: nil, op: "ping"),
            // Cut short inside each member the compact form leaves out.
            Array(#"{"event":"changeset","collection":"c"#.utf8),
            Array(#"{"event":"changeset","collection":"c","epoch":"e","from":"#.utf8),
            Array(#"{"event":"changeset","collection":"c","epoch":"e","from":1,"#.utf8),
            Array(#"{"event":"changeset","collection":"c","epoch":"e","from":1,"digest":"0"}"#.utf8),
            Array(#"{"event":"changeset","version":2}"#.utf8),
            [],
        ]
        for line in lines {
            #expect(compact(line, keepingCollection: false) == nil, "\(String(decoding: line, as: UTF8.self))")
            #expect(compact(line, keepingCollection: true) == nil)
        }
    }
}

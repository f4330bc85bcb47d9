import DiffcastCore
import Testing

@testable import DiffcastWire

/// What the Swift clients (`Follower`, `diffcast sub`) read a changeset event as: every list of
/// SPEC.md's changeset, sections by `index` and items by `at`, entry by entry. Reloads change no
/// state, so a mirror's state and digest cannot tell whether they were read: only this can.
@Suite struct EventDecoderTests {
    /// A changeset event as SPEC.md writes it, one entry in every list.
    static let line = """
        {"event":"changeset","collection":"c","epoch":"e","from":4,"version":5,\
        "sections":{"deleted":[{"index":2,"id":"sd"}],"inserted":[{"index":0,"id":"si","data":{"n":1}}],\
        "moved":[{"from":3,"to":1,"id":"sm"}],"updated":[{"index":4,"id":"su","data":[2]}],\
        "reloaded":[{"index":5,"id":"sr"}]},\
        "items":{"deleted":[{"at":[0,1],"id":"id"}],"inserted":[{"at":[1,0],"id":"ii","data":"x"}],\
        "moved":[{"from":[0,2],"to":[1,3],"id":"im"}],"updated":[{"at":[2,2],"id":"iu","data":true}],\
        "reloaded":[{"at":[3,4],"id":"ir"}]},"digest":"00000000000000ab"}
        """

    static func expected() -> Changeset {
        var changeset = Changeset()
        changeset.sections.deleted = [.init(at: 2, id: "sd")]
        changeset.sections.inserted = [.init(at: 0, id: "si", data: JSONText(canonical: #"{"n":1}"#))]
        changeset.sections.moved = [.init(from: 3, to: 1, id: "sm")]
        changeset.sections.updated = [.init(at: 4, id: "su", data: JSONText(canonical: "[2]"))]
        changeset.sections.reloaded = [.init(at: 5, id: "sr")]
        changeset.items.deleted = [.init(at: ItemPath(0, 1), id: "id")]
        changeset.items.inserted = [.init(at: ItemPath(1, 0), id: "ii", data: JSONText(canonical: #""x""#))]
        changeset.items.moved = [.init(from: ItemPath(0, 2), to: ItemPath(1, 3), id: "im")]
        changeset.items.updated = [.init(at: ItemPath(2, 2), id: "iu", data: JSONText(canonical: "true"))]
        changeset.items.reloaded = [.init(at: ItemPath(3, 4), id: "ir")]
        return changeset
    }

    @Test func everyListOfAChangesetIsRead() throws {
        let event = try EventDecoder.event(try JSONParser.parse(Array(Self.line.utf8)))
        guard case .changeset(let from, let version, let changeset, let window, let digest) = event else {
            Issue.record("not read as a changeset: \(event)")
            return
        }
        #expect(from == 4 && version == 5 && window == nil && digest == "00000000000000ab")
        let want = Self.expected()
        #expect(changeset.sections.reloaded == want.sections.reloaded)
        #expect(changeset.items.reloaded == want.items.reloaded)
        #expect(changeset == want)
    }

    /// What the daemon writes, the clients read back as it was (a law, over every list).
    @Test func theDaemonsEncodingReadsBackAsItWas() throws {
        let want = Self.expected()
        let line = WireEncoder.changesetEvent(
            collection: "c", epoch: "e", from: 4, to: 5, changeset: want, digest: Digest(value: 0xab))
        let read = try EventDecoder.changeset(try JSONParser.parse(line))
        #expect(read == want)
    }
}

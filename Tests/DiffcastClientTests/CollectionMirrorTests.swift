import DiffcastClient
import DiffcastCore
import DiffcastTestSupport
import DiffcastWire
import Testing

/// The client-side mirror against the real encoder: every event goes through bytes and the
/// parser, the mirror applies it and checks the digest it computes incrementally.
@Suite struct CollectionMirrorTests {
    private func event(_ bytes: [UInt8]) throws -> JSONValue {
        try JSONParser.parse(bytes.dropLast())
    }

    /// 3,000 small random changesets on a 100,000-item section: the mirror's digest matches the
    /// daemon's after every one, and its state is the document's at the end.
    @Test func tenThousandChangesetsOnALargeSection() throws {
        var rng = SplitMix64(seed: 100_000)
        var document = Document()
        let items = (0..<100_000).map { Item(id: "i\($0)", data: JSONText(canonical: "\($0)")) }
        try document.apply(.apply(sections: [SectionInput(id: "s", items: items)]))
        _ = document.takeMarks()
        var mirror = CollectionMirror()
        try mirror.feed(
            try event(WireEncoder.snapshotEvent(collection: "m", epoch: "e", version: 0, snapshot: document.snapshot)))
        var next = 100_000
        for version in 1...3_000 {
            let base = document.snapshot
            for _ in 0..<Int.random(in: 1...3, using: &rng) {
                let target: Identifier = "i\(Int.random(in: 0..<next, using: &rng))"
                let anchor: Identifier = "i\(Int.random(in: 0..<next, using: &rng))"
                let operation: WriteOperation
                switch Int.random(in: 0..<4, using: &rng) {
                case 0:
                    next += 1
                    operation = .insertItems([Item(id: "i\(next - 1)")], anchor: .after(anchor))
                case 1: operation = .moveItem(target, anchor: .before(anchor))
                case 2: operation = .deleteItems([target])
                default: operation = .updateItems([DataUpdate(id: target, data: JSONText(canonical: "[\(version)]"))])
                }
                try? document.apply(operation)
            }
            let changeset = document.changeset(since: base)
            let line = WireEncoder.changesetEvent(
                collection: "m", epoch: "e", from: UInt64(version - 1), to: UInt64(version), changeset: changeset,
                digest: Digest(of: document.snapshot))
            try mirror.feed(try event(line))
        }
        #expect(mirror.version == 3_000 && mirror.changesetsApplied == 3_000)
        #expect(plain(mirror.snapshot) == plain(document.snapshot))
        #expect(Digest(of: mirror.snapshot).description == ReferenceDigest.of(plain(document.snapshot)))
    }

    /// A changeset that does not fit, or whose digest is wrong, is a divergence, never applied
    /// silently. Each damaged event carries the digest of the state it would lead to if the
    /// damage went unnoticed (163a5421e623c5b2, of [s: b], from ../shared/conformance/model.py),
    /// so that each check is tried alone.
    @Test func aCorruptedEventIsADivergence() throws {
        func line(deleting id: String, digest: String) throws -> JSONValue {
            try JSONParser.parse(
                Array(
                    (#"{"event":"changeset","collection":"m","epoch":"e","from":1,"version":2,"items":{"deleted":[{"at":[0,0],"id":""#
                        + id + #""}]},"digest":""# + digest + #""}"#).utf8))
        }
        var mirror = CollectionMirror()
        try mirror.feed(
            try JSONParser.parse(
                Array(
                    #"{"event":"snapshot","collection":"m","epoch":"e","version":1,"sections":[{"id":"s","items":["a","b"]}],"digest":"1ae354cda546efbc"}"#
                        .utf8)))
        // The deletion names "b" where "a" is: the digest is that of deleting position 0.
        #expect(throws: CollectionMirror.Divergence.self) {
            try mirror.feed(try line(deleting: "b", digest: "163a5421e623c5b2"))
        }
        #expect(mirror.version == 1)
        // The right deletion with a wrong digest.
        #expect(throws: CollectionMirror.Divergence.self) {
            try mirror.feed(try line(deleting: "a", digest: "0000000000000000"))
        }
        #expect(mirror.version == 1)
        // Both right: it applies.
        try mirror.feed(try line(deleting: "a", digest: "163a5421e623c5b2"))
        #expect(mirror.version == 2 && mirror.sections.map { $0.items.map(\.id) } == [["b"]])
    }

    /// Index paths are read from the wire: at the extremes of Int they are a divergence, and the
    /// mirror keeps what it held (the first of these overflows `Int` unless checked).
    @Test(arguments: [
        #"{"inserted":[{"at":[0,9223372036854775807],"id":"x"},{"at":[0,9223372036854775807],"id":"y"}]}"#,
        #"{"inserted":[{"at":[0,9223372036854775806],"id":"x"},{"at":[0,9223372036854775807],"id":"y"}]}"#,
        #"{"inserted":[{"at":[0,-9223372036854775808],"id":"x"},{"at":[0,9223372036854775807],"id":"y"}]}"#,
        #"{"inserted":[{"at":[-1,0],"id":"x"}]}"#,
        #"{"inserted":[{"at":[9223372036854775807,0],"id":"x"}]}"#,
        #"{"deleted":[{"at":[0,9223372036854775807],"id":"a"}]}"#,
        #"{"moved":[{"id":"a","from":[0,0],"to":[0,-9223372036854775808]}]}"#,
        #"{"updated":[{"at":[-9223372036854775808,0],"id":"a"}]}"#,
        #"{"inserted":[{"at":[0,18446744073709551616],"id":"x"}]}"#,
    ])
    func indexPathsAtTheExtremesAreADivergence(items: String) throws {
        var mirror = CollectionMirror()
        try mirror.feed(
            try JSONParser.parse(
                Array(
                    #"{"event":"snapshot","collection":"m","epoch":"e","version":1,"sections":[{"id":"s","items":["a","b"]}],"digest":"1ae354cda546efbc"}"#
                        .utf8)))
        let line =
            #"{"event":"changeset","collection":"m","epoch":"e","from":1,"version":2,"items":"#
            + items + #","digest":"0000000000000000"}"#
        #expect(throws: CollectionMirror.Divergence.self) { try mirror.feed(try JSONParser.parse(Array(line.utf8))) }
        #expect(mirror.version == 1)
        #expect(Digest(of: mirror.snapshot).description == "1ae354cda546efbc")
    }
}

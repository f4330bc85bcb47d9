import DiffcastCore
import DiffcastTestSupport
import Testing

/// The contract-2 digest against values computed by ../shared/conformance/model.py's `digest()`
/// (not by this project), and the composition law that lets it be kept per chunk.
@Suite struct DigestTests {
    private static func snapshot(_ sections: [(String, String?, [(String, String?)])]) -> Snapshot {
        Snapshot(
            uncheckedSections: sections.map { section in
                Section(
                    id: Identifier(section.0), data: section.1.map { JSONText(canonical: $0) },
                    items: section.2.map { Item(id: Identifier($0.0), data: $0.1.map { JSONText(canonical: $0) }) })
            })
    }

    /// name, state, and model.py's digest of it.
    static let golden: [(String, [(String, String?, [(String, String?)])], String)] = [
        ("empty", [], "0000000000000000"),
        ("one empty section", [("s", nil, [])], "0d06942505776bf8"),
        ("a section with data", [("s", #"{"title":"News"}"#, [])], "167a198804d646e3"),
        ("items without data", [("s", nil, [("a", nil), ("b", nil)])], "1ae354cda546efbc"),
        ("items with data", [("s", nil, [("a", #"{"likes":5}"#), ("b", nil)])], "1ec6a85a4fdcadd2"),
        ("the same with one data change", [("s", nil, [("a", #"{"likes":6}"#), ("b", nil)])], "10197177aee5d9a8"),
        ("NFD e + U+0301", [("s", nil, [("e\u{301}", nil)])], "055e0a56333ad0c8"),
        ("NFC U+00E9", [("s", nil, [("\u{e9}", nil)])], "16f374f2eb67b5e5"),
        ("two sections without items", [("s1", nil, []), ("s2", nil, [])], "0abae6dc6ea86efd"),
        ("order swapped", [("s", nil, [("b", nil), ("a", #"{"likes":5}"#)])], "14ea22b0db6da3ec"),
        ("numbers and strings", [("s", "1.0", [("7", #""x""#), ("0", #"[1,"é",null,true]"#)])], "0581420c37ee1c42"),
    ]

    @Test(arguments: 0..<golden.count)
    func theDigestIsModelPysDigest(index: Int) {
        let (name, sections, expected) = Self.golden[index]
        let snapshot = Self.snapshot(sections)
        #expect(Digest(of: snapshot).description == expected, "\(name)")
        #expect(ReferenceDigest.of(plain(snapshot)) == expected, "the tests' reference digest, \(name)")
        #expect(Digest(of: snapshot.outline).description == expected, "from plain values, \(name)")
    }

    @Test func canonicallyEquivalentIdentifiersAreDifferent() {
        #expect(Identifier("e\u{301}") != Identifier("\u{e9}"))
        #expect(
            Set([Identifier("e\u{301}"), Identifier("\u{e9}"), Identifier("A\u{30a}"), Identifier("\u{212b}")]).count
                == 4)
        #expect(JSONText(canonical: "\"e\u{301}\"") != JSONText(canonical: "\"\u{e9}\""))
        #expect(Identifier(integerText: "-0") == Identifier("0"))
    }

    /// D(XY) = D(X)·B^|Y| + D(Y) mod P for random token sequences split at random points,
    /// with the reference's arithmetic on one side and DigestPart on the other.
    @Test func digestsCompose() {
        var rng = SplitMix64(seed: 2026)
        for _ in 0..<300 {
            let count = Int.random(in: 0..<1500, using: &rng)
            let tokens = (0..<count).map { _ in rng.next() }
            let split = Int.random(in: 0...count, using: &rng)
            var whole = DigestPart.empty
            for token in tokens { whole.append(tokenHash: token) }
            var left = DigestPart.empty
            for token in tokens[..<split] { left.append(tokenHash: token) }
            var right = DigestPart.empty
            for token in tokens[split...] { right.append(tokenHash: token) }
            let combined = Self.reference(left.value, right.value, right.tokens)
            #expect(combined == whole.value)
            left.append(right)
            #expect(left == whole)
        }
    }

    /// D(X)·B^n + D(Y) mod P with plain 128-bit arithmetic.
    private static func reference(_ left: UInt64, _ right: UInt64, _ count: Int) -> UInt64 {
        let modulus = UInt128((1 << 61) - 1)
        var power = UInt128(1)
        for _ in 0..<count { power = power * 1_099_511_628_211 % modulus }
        return UInt64((UInt128(left) * power % modulus + UInt128(right)) % modulus)
    }

    /// The digest of a large collection changes with one item's data, and is kept per chunk:
    /// the incremental value equals the reference's full pass.
    @Test func aDataChangeInALargeCollectionChangesTheDigest() throws {
        var document = Document()
        let items = (0..<5000).map { Item(id: "i\($0)", data: JSONText(canonical: "\($0)")) }
        try document.apply(.apply(sections: [SectionInput(id: "s", items: items)]))
        let before = Digest(of: document.snapshot)
        try document.apply(.updateItems([DataUpdate(id: "i4321", data: JSONText(canonical: "0"))]))
        let after = Digest(of: document.snapshot)
        #expect(before != after)
        #expect(after.description == ReferenceDigest.of(plain(document.snapshot)))
    }
}

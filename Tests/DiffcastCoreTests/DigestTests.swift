import DiffcastCore
import DiffcastTestSupport
import Testing

/// The contract-2 digest: identifiers compared as they are, and the composition law that lets
/// it be kept per chunk. Its values against ../shared/conformance/model.py's `digest()` are
/// checked in DiffcastWireTests' `GoldenVectorTests` (Tests/Vectors/golden.json).
@Suite struct DigestTests {
    @Test func canonicallyEquivalentIdentifiersAreDifferent() {
        #expect(Identifier("e\u{301}") != Identifier("\u{e9}"))
        #expect(
            Set([Identifier("e\u{301}"), Identifier("\u{e9}"), Identifier("A\u{30a}"), Identifier("\u{212b}")]).count
                == 4)
        #expect(JSONText(canonical: "\"e\u{301}\"") != JSONText(canonical: "\"\u{e9}\""))
        #expect(Identifier(integerText: "-0") == Identifier("0"))
    }

    /// Texts are equal exactly when their bytes are, whether they share storage, are small
    /// strings kept inline, or are long ones of the same length.
    @Test func textsAreEqualExactlyWhenTheirBytesAre() {
        let long = String(repeating: "a", count: 40)
        #expect(UTF8Bytes.equal(long, long))
        #expect(UTF8Bytes.equal(long, String(repeating: "a", count: 40)))
        #expect(!UTF8Bytes.equal(long, String(repeating: "a", count: 39) + "b"))
        #expect(!UTF8Bytes.equal(long, String(repeating: "a", count: 41)))
        #expect(UTF8Bytes.equal("abcdefgh1", "abcdefgh" + String(1)))
        #expect(!UTF8Bytes.equal("abcdefgh1", "abcdefgh2"))
        #expect(!UTF8Bytes.equal("e\u{301}", "\u{e9}"))
        // A short text in a long string's storage and the same text kept inline: two
        // representations, one text.
        var shortInStorage = String(repeating: "x", count: 40)
        shortInStorage.removeLast(35)
        #expect(UTF8Bytes.equal(shortInStorage, "xxxxx") && UTF8Bytes.equal("xxxxx", shortInStorage))
        #expect(!UTF8Bytes.equal(shortInStorage, "xxxxy"))
        #expect(Identifier(shortInStorage) == Identifier("xxxxx"))
        #expect(JSONText(canonical: shortInStorage) == JSONText(canonical: "xxxxx"))
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

    /// An item's token hash is FNV-1a over `I`, the id, `\n`, the data and `\n`, byte by byte
    /// (SPEC.md "Digest"): against that loop for texts of every length from 0 to 40 (every
    /// remainder of the eight-byte steps), ASCII and not, long strings and small ones.
    @Test func tokenHashesAreFNV1aOfTheToken() {
        func reference(_ bytes: [UInt8]) -> UInt64 {
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325
            for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
            return hash
        }
        let alphabet = Array("aZ9\"é\u{1F600}".unicodeScalars)
        for length in 0...40 {
            let scalars = (0..<length).map { alphabet[($0 * 7 + length) % alphabet.count] }
            let text = String(String.UnicodeScalarView(scalars))
            let id = Identifier("id-" + text)
            let data = JSONText(canonical: "\"" + text + "\"")
            let token = [UInt8(ascii: "I")] + Array(id.text.utf8) + [0x0a] + Array(data.text.utf8) + [0x0a]
            #expect(Item(id: id, data: data).tokenHash == reference(token), "length \(length)")
            let bare = [UInt8(ascii: "I")] + Array(id.text.utf8) + [0x0a, 0x0a]
            #expect(Item(id: id).tokenHash == reference(bare), "length \(length)")
        }
    }
}

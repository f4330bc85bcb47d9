import DiffcastClient
import DiffcastCore
import DiffcastTestSupport
import DiffcastWire
import Foundation
import Testing

/// Tests/Vectors/golden.json, computed by ../shared/conformance/model.py (scripts/golden-vectors.py)
/// and read by the Python and JavaScript suites too: each snapshot event's digest, and each
/// changeset event taking its snapshot to the target sections and digest.
@Suite struct GoldenVectorTests {
    struct Vectors: Decodable {
        struct DigestVector: Decodable {
            let name: String
            let snapshot: String
            let digest: String
        }
        struct ChangesetVector: Decodable {
            let name: String
            let snapshot: String
            let changeset: String
            /// The changeset as a compact stream sends it (`CompactEvents`).
            let compactChangeset: String
            let sections: String
            let digest: String

            enum CodingKeys: String, CodingKey {
                case name, snapshot, changeset, sections, digest
                case compactChangeset = "compact_changeset"
            }
        }
        let digests: [DigestVector]
        let changesets: [ChangesetVector]
    }

    static let vectors: Vectors = {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../Vectors/golden.json")
        guard let data = try? Data(contentsOf: path), let vectors = try? JSONDecoder().decode(Vectors.self, from: data)
        else { return Vectors(digests: [], changesets: []) }
        return vectors
    }()

    private func parse(_ text: String) throws -> JSONValue {
        try JSONParser.parse(Array(text.utf8))
    }

    @Test func theVectorsAreThere() {
        #expect(Self.vectors.digests.count >= 10 && Self.vectors.changesets.count >= 10)
    }

    @Test(arguments: Self.vectors.digests.indices)
    func aSnapshotHasTheModelsDigest(index: Int) throws {
        let vector = Self.vectors.digests[index]
        var mirror = CollectionMirror()
        try mirror.feed(try parse(vector.snapshot))
        #expect(Digest(of: mirror.snapshot).description == vector.digest, "\(vector.name)")
        #expect(ReferenceDigest.of(plain(mirror.snapshot)) == vector.digest, "the reference digest, \(vector.name)")
        #expect(Digest(of: mirror.sections).description == vector.digest, "from plain values, \(vector.name)")
    }

    @Test(arguments: Self.vectors.changesets.indices)
    func aChangesetLeadsToTheModelsTarget(index: Int) throws {
        let vector = Self.vectors.changesets[index]
        var mirror = CollectionMirror()
        try mirror.feed(try parse(vector.snapshot))
        try mirror.feed(try parse(vector.changeset))
        #expect(mirror.sections == (try EventDecoder.outline(try parse(vector.sections))), "\(vector.name)")
        #expect(Digest(of: mirror.snapshot).description == vector.digest, "\(vector.name)")
        // The compact form of the same changeset leads to the same target.
        var compact = CollectionMirror()
        try compact.feed(try parse(vector.snapshot))
        try compact.feed(try parse(vector.compactChangeset))
        #expect(compact.sections == mirror.sections, "compact, \(vector.name)")
        #expect(compact.version == 2 && compact.epoch == "e", "compact, \(vector.name)")
    }
}

import DiffcastClient
import DiffcastCore
import DiffcastWire

extension FuzzTargets {
    /// Event lines from a daemon, as a client follows a collection (`DiffcastClient.Connection`
    /// parses each line with `JSONParser.parse`; `Follower` feeds events to a `CollectionMirror`):
    /// snapshots, changesets (`Changeset.apply`, the digest checked) and drops. A changeset the
    /// mirror takes must survive the daemon's encoding (`WireEncoder.changesetEvent`) unchanged,
    /// and its compact forms (`CompactEvents`) must apply as it does.
    ///
    /// Input: event lines.
    public static func eventLine(_ input: UnsafeRawBufferPointer) {
        var mirror = CollectionMirror()
        for line in Fuzz.parts(Array(input), separator: UInt8(ascii: "\n")) {
            guard let event = try? JSONParser.parse(line), event["event"] != nil else { continue }
            let before = mirror
            guard case .changeset(let changeset)? = try? mirror.feed(event) else { continue }
            // The changeset as the daemon would send it reads back the same and applies the same.
            let encoded = WireEncoder.changesetEvent(
                collection: "c", epoch: "e", from: before.version ?? 0, to: mirror.version ?? 0, changeset: changeset,
                digest: Digest(of: mirror.snapshot))
            guard let value = try? JSONParser.parse(encoded), let again = try? EventDecoder.changeset(value),
                again == changeset
            else { Fuzz.failure("a changeset does not survive encoding: \(String(decoding: encoded, as: UTF8.self))") }
            var replay = before
            guard (try? replay.feed(value)) != nil, Digest(of: replay.snapshot) == Digest(of: mirror.snapshot) else {
                Fuzz.failure("a re-encoded changeset does not apply: \(String(decoding: encoded, as: UTF8.self))")
            }
            for keepingCollection in [false, true] {
                var compactReplay = before
                guard
                    let compact = encoded.withUnsafeBytes({
                        CompactEvents.changeset($0, keepingCollection: keepingCollection)
                    }),
                    let compactValue = try? JSONParser.parse(compact), (try? compactReplay.feed(compactValue)) != nil,
                    Digest(of: compactReplay.snapshot) == Digest(of: mirror.snapshot),
                    compactReplay.version == mirror.version
                else { Fuzz.failure("a compact changeset does not apply: \(String(decoding: encoded, as: UTF8.self))") }
            }
        }
    }
}

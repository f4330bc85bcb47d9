/// SPEC.md's digest of a collection: the polynomial hash of every section token followed by its
/// items' tokens, covering order, identity and data. A client that computes another value has
/// diverged.
public struct Digest: Hashable, Sendable, CustomStringConvertible {
    public let value: UInt64

    public init(value: UInt64) {
        self.value = value
    }

    /// The digest of a snapshot from its chunks' cached parts: one step per section and per
    /// chunk, never per item.
    ///
    /// - Complexity: O(sections + chunks); a chunk whose items changed is re-hashed once
    ///   (O(its items, at most 512)) and cached.
    public init(of snapshot: Snapshot) {
        var part = DigestPart.empty
        for section in snapshot.sections {
            part.append(tokenHash: section.tokenHash)
            part.append(section.items.digest)
        }
        value = part.value
    }

    /// The digest of plain values, token by token (for outlines built outside a snapshot).
    public init(of outline: [SectionOutline]) {
        var part = DigestPart.empty
        for section in outline {
            part.append(tokenHash: TokenHash.of(tag: UInt8(ascii: "S"), id: section.id, data: section.data))
            for item in section.items { part.append(tokenHash: item.tokenHash) }
        }
        value = part.value
    }

    /// Sixteen lowercase hex digits, as on the wire.
    public var description: String { DigestPart(value: value, tokens: 0).hex }
}

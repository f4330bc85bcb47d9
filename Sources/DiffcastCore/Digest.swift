/// SPEC.md's digest: 64-bit FNV-1a over `S` + section id + `\n`, then `I` + item id + `\n` for
/// each of its items, section by section. A client that computes another value has diverged.
public struct Digest: Hashable, Sendable, CustomStringConvertible {
    public let value: UInt64

    private static let offsetBasis: UInt64 = 0xcbf2_9ce4_8422_2325
    private static let prime: UInt64 = 0x100_0000_01b3

    public init(of snapshot: Snapshot) {
        var hash = Self.offsetBasis
        for section in snapshot.sections {
            Self.mix(UInt8(ascii: "S"), section.id, into: &hash)
            for item in section.items {
                Self.mix(UInt8(ascii: "I"), item.id, into: &hash)
            }
        }
        value = hash
    }

    public init(of outline: [SectionOutline]) {
        self.init(of: Snapshot(uncheckedSections: outline.map { Section(id: $0.id, data: $0.data, items: $0.items) }))
    }

    @inline(__always)
    private static func mix(_ tag: UInt8, _ id: Identifier, into hash: inout UInt64) {
        hash = (hash ^ UInt64(tag)) &* prime
        var text = id
        text.withUTF8 { bytes in
            for byte in bytes {
                hash = (hash ^ UInt64(byte)) &* prime
            }
        }
        hash = (hash ^ UInt64(UInt8(ascii: "\n"))) &* prime
    }

    /// Sixteen lowercase hex digits, as on the wire.
    public var description: String {
        let hex = String(value, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}

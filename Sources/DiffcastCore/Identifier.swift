#if canImport(Glibc)
    import Glibc
#endif

/// The identifier of a section or item: its UTF-8 bytes, compared and hashed as bytes.
///
/// Swift's `String` equality is Unicode canonical equivalence, which would merge `"é"` (U+00E9)
/// and `"e\u{301}"`; SPEC.md says they are two identifiers. The hash is computed once, when the
/// identifier is made (a request is parsed once; its identifiers are looked up many times), with
/// the process-seeded `Hasher`, so crafted collisions cannot flood the tables.
public struct Identifier: Hashable, Comparable, Sendable, CustomStringConvertible,
    ExpressibleByStringInterpolation
{
    /// The identifier's text, exactly as the client sent it (never normalized).
    public let text: String
    private let bytesHash: Int

    public init(_ text: String) {
        var text = text
        text.makeContiguousUTF8()
        self.text = text
        var hasher = Hasher()
        text.utf8.withContiguousStorageIfAvailable { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        bytesHash = hasher.finalize()
    }

    /// An identifier with a chosen hash, for tests of what two identifiers with one hash do
    /// (with the real hash, a 64-bit collision is never seen).
    init(_ text: String, hashForTesting hash: Int) {
        self.text = text
        bytesHash = hash
    }

    public init(stringLiteral value: String) {
        self.init(value)
    }

    public init(stringInterpolation: DefaultStringInterpolation) {
        self.init(String(stringInterpolation: stringInterpolation))
    }

    /// The identifier of a JSON integer, given its text: canonical decimal (`-0` is `0`).
    public init(integerText: String) {
        self.init(integerText == "-0" ? "0" : integerText)
    }

    public var description: String { text }

    /// The cached hash of the bytes, for the tables of this module.
    var hashBits: UInt64 { UInt64(truncatingIfNeeded: bytesHash) }

    public static func == (lhs: Identifier, rhs: Identifier) -> Bool {
        lhs.bytesHash == rhs.bytesHash
            && (UTF8Bytes.sameRepresentation(lhs.text, rhs.text) || UTF8Bytes.equal(lhs.text, rhs.text))
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(bytesHash)
    }

    /// What `Dictionary` and `Set` ask for: the cached hash (already keyed by the process's
    /// random seed, so flooding resistance stays) mixed with the table's own seed by one
    /// multiply and shift, instead of a SipHash round per lookup, which would dominate a full
    /// diff. The mix keeps tables of different seeds from sharing a bucket order.
    public func _rawHashValue(seed: Int) -> Int {
        var mixed = UInt64(truncatingIfNeeded: bytesHash ^ seed) &* 0x9E37_79B9_7F4A_7C15
        mixed ^= mixed >> 29
        return Int(truncatingIfNeeded: mixed)
    }

    /// Byte order of the UTF-8 text (which is also code point order).
    public static func < (lhs: Identifier, rhs: Identifier) -> Bool {
        UTF8Bytes.less(lhs.text, rhs.text)
    }
}

/// Byte-wise comparisons of strings, which `String`'s own operators do not offer.
public enum UTF8Bytes {
    /// Whether the two strings are the same two words: the same storage, or the same small
    /// (inline) string, and so the same bytes. It reads no byte of either: a snapshot's
    /// unchanged items share their strings with the version before, and a million-item diff
    /// then leaves their texts out of the cache (as `String.==` does). Inlined, so that a
    /// caller reading its strings in place (from an item buffer) makes no call and no copy.
    /// A 64-bit platform's `String` is two words; elsewhere the bytes decide.
    @inline(__always)
    static func sameRepresentation(_ lhs: String, _ rhs: String) -> Bool {
        MemoryLayout<String>.size == MemoryLayout<(UInt64, UInt64)>.size
            && unsafeBitCast(lhs, to: (UInt64, UInt64).self) == unsafeBitCast(rhs, to: (UInt64, UInt64).self)
    }

    /// Whether the two strings hold the same UTF-8 bytes.
    ///
    /// It neither retains nor releases, and `@_effects(readonly)` tells the optimizer so: a
    /// caller that reads the strings in place (a diff, from the item buffers of two snapshots)
    /// then passes them without copying them. Otherwise every comparison of a diff would retain
    /// and release both items' texts, atomic writes to memory the diff does not otherwise need,
    /// which would be most of a full diff's time. The closures capture the parameters, not
    /// `utf8` views of them, for the same reason: a captured view is a copy, retained around
    /// the comparison.
    @_effects(readonly)
    public static func equal(_ lhs: String, _ rhs: String) -> Bool {
        if sameRepresentation(lhs, rhs) { return true }
        guard lhs.utf8.count == rhs.utf8.count else { return false }
        let fast: Bool?? = lhs.utf8.withContiguousStorageIfAvailable { leftBytes -> Bool? in
            rhs.utf8.withContiguousStorageIfAvailable { rightBytes -> Bool in
                guard let left = leftBytes.baseAddress, let right = rightBytes.baseAddress else { return true }
                return memcmp(left, right, leftBytes.count) == 0
            }
        }
        if let fast, let result = fast { return result }
        return lhs.utf8.elementsEqual(rhs.utf8)
    }

    public static func less(_ lhs: String, _ rhs: String) -> Bool {
        lhs.utf8.lexicographicallyPrecedes(rhs.utf8)
    }
}

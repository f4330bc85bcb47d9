/// Arithmetic of SPEC.md's digest: a polynomial hash modulo the Mersenne prime 2^61 - 1 over
/// tokens, each token hashed with 64-bit FNV-1a.
///
/// A sequence of tokens is summarized by a `DigestPart` (its value and its token count), and
/// parts compose: `D(XY) = D(X) * B^|Y| + D(Y) mod P`. That is what lets the daemon and a
/// mirror keep a collection's digest per chunk and combine the chunks, never re-hashing items
/// that did not change.
public struct DigestPart: Hashable, Sendable {
    public static let modulus: UInt64 = (1 << 61) - 1
    public static let base: UInt64 = 1_099_511_628_211

    public private(set) var value: UInt64
    public private(set) var tokens: Int

    public static let empty = DigestPart(value: 0, tokens: 0)

    public init(value: UInt64, tokens: Int) {
        self.value = value
        self.tokens = tokens
    }

    /// The part of one token whose FNV-1a hash is `tokenHash`.
    public init(tokenHash: UInt64) {
        self.init(value: tokenHash % Self.modulus, tokens: 1)
    }

    /// Appends one token, given its FNV-1a hash.
    public mutating func append(tokenHash: UInt64) {
        value = Self.add(Self.multiply(value, Self.base), tokenHash % Self.modulus)
        tokens += 1
    }

    /// Appends a whole sequence summarized by `part`.
    public mutating func append(_ part: DigestPart) {
        value = Self.add(Self.multiply(value, Self.power(part.tokens)), part.value)
        tokens += part.tokens
    }

    /// Sixteen lowercase hex digits, as on the wire.
    public var hex: String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    // MARK: - Arithmetic modulo 2^61 - 1

    @inline(__always)
    static func add(_ a: UInt64, _ b: UInt64) -> UInt64 {
        let sum = a + b  // both < 2^61: no overflow
        return sum >= modulus ? sum - modulus : sum
    }

    @inline(__always)
    static func multiply(_ a: UInt64, _ b: UInt64) -> UInt64 {
        let (high, low) = a.multipliedFullWidth(by: b)
        // a*b = high * 2^64 + low; 2^61 ≡ 1, so fold the bits above 61 onto the bits below.
        let folded = (low & modulus) + ((low >> 61) | (high << 3))
        return folded >= modulus ? folded - modulus : folded
    }

    /// B^0 ... B^1024: chunks hold at most a few hundred items, so their powers are looked up.
    private static let smallPowers: [UInt64] = {
        var powers: [UInt64] = [1]
        powers.reserveCapacity(1025)
        for _ in 0..<1024 { powers.append(multiply(powers[powers.count - 1], base)) }
        return powers
    }()

    static func power(_ exponent: Int) -> UInt64 {
        if exponent < smallPowers.count { return smallPowers[exponent] }
        var result: UInt64 = 1
        var square = base
        var remaining = exponent
        while remaining > 0 {
            if remaining & 1 == 1 { result = multiply(result, square) }
            square = multiply(square, square)
            remaining >>= 1
        }
        return result
    }
}

/// 64-bit FNV-1a of the token `tag + identifier + "\n" + data + "\n"` (SPEC.md "Digest").
public enum TokenHash {
    private static let offsetBasis: UInt64 = 0xcbf2_9ce4_8422_2325
    private static let prime: UInt64 = 0x100_0000_01b3

    public static func of(tag: UInt8, id: Identifier, data: JSONText?) -> UInt64 {
        var hash = offsetBasis
        hash = (hash ^ UInt64(tag)) &* prime
        mix(id.text, into: &hash)
        hash = (hash ^ 0x0a) &* prime
        if let data { mix(data.text, into: &hash) }
        hash = (hash ^ 0x0a) &* prime
        return hash
    }

    @inline(__always)
    private static func mix(_ text: String, into hash: inout UInt64) {
        var state = hash
        let done: Void? = text.utf8.withContiguousStorageIfAvailable { bytes in
            for byte in bytes { state = (state ^ UInt64(byte)) &* prime }
        }
        if done == nil {
            for byte in text.utf8 { state = (state ^ UInt64(byte)) &* prime }
        }
        hash = state
    }
}

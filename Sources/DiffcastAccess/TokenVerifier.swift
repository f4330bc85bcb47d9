import DiffcastWire
import ExtrasBase64
import JWTKit

/// A token whose signature and claims held when it was presented: who holds it, what it
/// permits, and until when.
public struct VerifiedToken: Sendable, Equatable {
    /// The `sub` claim (logs and per-holder limits); nil when the token names none.
    public let subject: String?
    public let rights: Rights
    /// The `exp` claim, seconds since 1970.
    public let expiresAt: Double
    /// The token as presented, kept to verify it again when the key set changes.
    public let text: String

    public init(subject: String?, rights: Rights, expiresAt: Double, text: String) {
        self.subject = subject
        self.rights = rights
        self.expiresAt = expiresAt
        self.text = text
    }

    /// How logs and messages name the holder.
    public var holderName: String { subject.map { "'\($0)'" } ?? "a token without sub" }
}

/// Checks capability tokens (SPEC.md "Scoped access"): a compact JWS whose `alg` is one its key
/// is for, signed by a key of the set (picked by `kid` when named), with an `exp`, within `nbf`,
/// for the configured audience and issuer, and a `diffcast` claim of well-formed rights.
public struct TokenVerifier: Sendable, Equatable {
    public var keys: KeySet
    /// Required in `aud` when set.
    public var audience: String?
    /// Required as `iss` when set.
    public var issuer: String?
    /// Seconds of clock difference forgiven on `exp` and `nbf`.
    public var leewaySeconds: Double

    /// Longest token read; a longer one is refused before it is decoded.
    public static let maximumTokenBytes = 8192

    public init(keys: KeySet, audience: String? = nil, issuer: String? = nil, leewaySeconds: Double = 5) {
        self.keys = keys
        self.audience = audience
        self.issuer = issuer
        self.leewaySeconds = leewaySeconds
    }

    /// The token's holder and rights, or why it is refused. `now` is seconds since 1970.
    ///
    /// The header is read first (its `alg` and `kid` choose the keys), the signature is checked
    /// by JWTKit, and only a signed payload's claims are read.
    public func verify(_ token: String, now: Double) throws(TokenRefusal) -> VerifiedToken {
        let bytes = Array(token.utf8)
        guard bytes.count <= Self.maximumTokenBytes else {
            throw TokenRefusal("the token is longer than \(Self.maximumTokenBytes) bytes")
        }
        let parts = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3, let signedEnd = bytes.lastIndex(of: UInt8(ascii: ".")) else {
            throw TokenRefusal("not a JWT (expected three base64url parts separated by dots)")
        }
        let header = try Self.json(parts[0], part: "header")
        guard case .string(let algorithm)? = header["alg"] else { throw TokenRefusal("the header has no alg") }
        guard algorithm != "none" else { throw TokenRefusal("unsigned token (alg none) refused") }
        if header["crit"] != nil { throw TokenRefusal("critical header parameters are not supported") }
        var identifier: String?
        if let kid = header["kid"] {
            guard case .string(let text) = kid else { throw TokenRefusal("the header's kid is not a string") }
            guard keys.holds(identifier: text) else { throw TokenRefusal("unknown key id '\(text)'") }
            identifier = text
        }
        let candidates = keys.candidates(algorithm: algorithm, identifier: identifier)
        guard !candidates.isEmpty else {
            throw TokenRefusal(
                identifier.map { "key '\($0)' is not for alg \(algorithm)" }
                    ?? "no key for alg \(algorithm) (the key set holds \(Set(keys.keys.map(\.algorithm)).sorted()))")
        }
        guard let signature = Self.base64URL(parts[2]) else { throw TokenRefusal("the signature is not base64url") }
        let signed = bytes[..<signedEnd]
        let isSigned = candidates.contains { key in
            (try? key.verifier.verify(signature, signs: signed)) == true
        }
        guard isSigned else { throw TokenRefusal("bad signature") }
        return try checkClaims(Self.json(parts[1], part: "payload"), text: token, now: now)
    }

    private func checkClaims(_ claims: JSONValue, text: String, now: Double) throws(TokenRefusal) -> VerifiedToken {
        guard case .object = claims else { throw TokenRefusal("the payload is not a JSON object") }
        guard let expiry = try Self.time(claims, "exp") else { throw TokenRefusal("the token has no exp") }
        guard now <= expiry + leewaySeconds else { throw TokenRefusal("the token expired") }
        if let notBefore = try Self.time(claims, "nbf"), now + leewaySeconds < notBefore {
            throw TokenRefusal("the token is not valid yet (nbf)")
        }
        if let audience {
            let audiences: [JSONValue] =
                switch claims["aud"] {
                case .array(let values)?: values
                case let value?: [value]
                case nil: []
                }
            guard audiences.contains(.string(audience)) else {
                throw TokenRefusal("the token is not for audience '\(audience)'")
            }
        }
        if let issuer, claims["iss"] != .string(issuer) {
            throw TokenRefusal("the token is not from issuer '\(issuer)'")
        }
        var subject: String?
        if let sub = claims["sub"] {
            guard case .string(let text) = sub else { throw TokenRefusal("sub is not a string") }
            subject = text
        }
        var rights = Rights.none
        if let claim = claims["diffcast"] {
            do {
                rights = try Rights(claim: claim)
            } catch {
                throw TokenRefusal("its diffcast claim: \(error)")
            }
        }
        return VerifiedToken(subject: subject, rights: rights, expiresAt: expiry, text: text)
    }

    /// A NumericDate claim (seconds since 1970, possibly fractional), if present.
    private static func time(_ claims: JSONValue, _ name: String) throws(TokenRefusal) -> Double? {
        guard let value = claims[name] else { return nil }
        guard case .number(let text) = value, let seconds = Double(text), seconds.isFinite else {
            throw TokenRefusal("\(name) is not a number of seconds")
        }
        return seconds
    }

    private static func json(_ part: ArraySlice<UInt8>, part name: String) throws(TokenRefusal) -> JSONValue {
        guard let bytes = base64URL(part) else { throw TokenRefusal("the \(name) is not base64url") }
        do {
            return try JSONParser.parse(bytes, maximumDepth: 16)
        } catch {
            throw TokenRefusal("the \(name) is not JSON (\(error.message))")
        }
    }

    private static func base64URL(_ part: ArraySlice<UInt8>) -> [UInt8]? {
        guard !part.isEmpty else { return [] }
        return try? Base64.decode(bytes: part, options: [.base64UrlAlphabet, .omitPaddingCharacter])
    }
}

/// Why a token was refused, for the `unauthorized` answer and the log.
public struct TokenRefusal: Error, CustomStringConvertible, Equatable {
    public let description: String

    public init(_ description: String) {
        self.description = description
    }
}

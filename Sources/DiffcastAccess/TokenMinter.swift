import DiffcastWire
import ExtrasBase64
import FoundationEssentials
import JWTKit

/// Makes capability tokens from a private JSON Web Key (`diffcast token`, tests, benchmarks):
/// what a team's backend does with its own JOSE library. JWTKit signs.
public enum TokenMinter {
    /// What a minted token says.
    public struct Claims: Sendable {
        public var subject: String?
        public var rights: Rights
        public var issuedAt: Double
        public var expiresAt: Double
        public var notBefore: Double?
        public var audience: String?
        public var issuer: String?

        public init(subject: String?, rights: Rights, issuedAt: Double, expiresAt: Double) {
            self.subject = subject
            self.rights = rights
            self.issuedAt = issuedAt
            self.expiresAt = expiresAt
        }
    }

    /// A signed compact JWS of `claims`, with the key's `kid` in its header when it has one.
    public static func mint(_ claims: Claims, keyJSON: [UInt8]) async throws(KeySetError) -> String {
        let key: JSONValue
        do {
            key = try JSONParser.parse(keyJSON, maximumDepth: 16)
        } catch {
            throw KeySetError("the key is not JSON (\(error.message))")
        }
        let payload = Payload(claims)
        do {
            return try await sign(payload, key: key)
        } catch let error as KeySetError {
            throw error
        } catch {
            throw KeySetError("cannot sign with this key: \(error)")
        }
    }

    /// `mint`, waited for: for synchronous programs (benchmarks, scripts).
    public static func mintWaiting(_ claims: Claims, keyJSON: [UInt8]) throws(KeySetError) -> String {
        do {
            return try blocking { try await mint(claims, keyJSON: keyJSON) }
        } catch let error as KeySetError {
            throw error
        } catch {
            throw KeySetError("cannot sign with this key: \(error)")
        }
    }

    private static func sign(_ payload: Payload, key: JSONValue) async throws -> String {
        guard case .object(var members) = key, case .string(let type)? = key["kty"] else {
            throw KeySetError("a key is a JSON object with \"kty\"")
        }
        let kid: String? = if case .string(let text)? = key["kid"] { text } else { nil }
        let collection = JWTKeyCollection()
        let identifier = JWKIdentifier(string: kid ?? "key")
        if type == "oct" {
            guard case .string(let secret)? = key["k"],
                let bytes = try? Base64.decode(string: secret, options: [.base64UrlAlphabet, .omitPaddingCharacter])
            else {
                throw KeySetError("an oct key needs \"k\" (base64url)")
            }
            await collection.add(hmac: HMACKey(from: bytes), digestAlgorithm: .sha256, kid: identifier)
        } else {
            guard key["d"] != nil else { throw KeySetError("a \(type) key signs only with its private part (\"d\")") }
            let algorithm: String =
                switch type {
                case "RSA": "RS256"
                case "EC": "ES256"
                default: "EdDSA"
                }
            members.removeAll { $0.key == "kid" || $0.key == "alg" }
            members += [.init("kid", .string(identifier.string)), .init("alg", .string(algorithm))]
            var output = JSONOutput()
            output.append(.object(members))
            try await collection.add(jwk: JSONDecoder().decode(JWK.self, from: Data(output.bytes)))
        }
        var header = JWTHeader()
        header.typ = "JWT"
        if let kid { header.kid = kid }
        return try await collection.sign(payload, kid: identifier, header: header)
    }

    /// The claims as JSON, `diffcast` in the form `Rights(claim:)` reads.
    struct Payload: JWTPayload {
        var exp: Double
        var nbf: Double?
        var iat: Double
        var sub: String?
        var aud: String?
        var iss: String?
        var diffcast: RightsClaim

        init(_ claims: Claims) {
            exp = claims.expiresAt.rounded(.down)
            nbf = claims.notBefore
            iat = claims.issuedAt.rounded(.down)
            sub = claims.subject
            aud = claims.audience
            iss = claims.issuer
            diffcast = RightsClaim(claims.rights)
        }

        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    struct RightsClaim: Codable, Sendable {
        var read: [String]
        var write: [String]
        var drop: [String]
        var admin: Bool?

        init(_ rights: Rights) {
            read = rights.read.patterns.map(\.description)
            write = rights.write.patterns.map(\.description)
            drop = rights.drop.patterns.map(\.description)
            admin = rights.admin ? true : nil
        }
    }
}

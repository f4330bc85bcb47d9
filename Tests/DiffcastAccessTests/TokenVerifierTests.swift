import DiffcastAccess
import DiffcastWire
import Foundation
import Testing

/// Tokens and a key set made by PyJWT (Tests/Vectors/tokens.json), not by the code under test:
/// every algorithm accepted, every kind of bad token refused for its own reason.
@Suite struct TokenVerifierTests {
    struct Vectors {
        let jwks: [UInt8]
        let tokens: [String: String]
    }

    static let vectors: Vectors = {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../Vectors/tokens.json")
        guard let data = try? Data(contentsOf: path),
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let jwks = object["jwks"], let tokens = object["tokens"] as? [String: String],
            let jwksData = try? JSONSerialization.data(withJSONObject: jwks)
        else { return Vectors(jwks: [], tokens: [:]) }
        return Vectors(jwks: Array(jwksData), tokens: tokens)
    }()

    /// 2001-09-09: before every vector's `exp`, after the expired one's.
    static let now: Double = 1_000_000_500

    func verifier(audience: String? = nil, issuer: String? = nil) async throws -> TokenVerifier {
        TokenVerifier(
            keys: try await KeySet(json: Self.vectors.jwks, source: "tokens.json"), audience: audience, issuer: issuer)
    }

    func token(_ name: String) throws -> String {
        try #require(Self.vectors.tokens[name], "vector \(name)")
    }

    @Test(arguments: ["hs", "rs", "es", "ed", "hs_nokid", "rs_nokid", "es_nokid", "ed_nokid"])
    func everyAlgorithmIsAccepted(_ name: String) async throws {
        let verified = try await verifier().verify(try token(name), now: Self.now)
        #expect(verified.subject == "alice")
        #expect(verified.expiresAt == 4_102_444_800)
        #expect(verified.rights.read.contains("inbox.alice"))
        #expect(verified.rights.read.contains("news.eu.fr"))
        #expect(!verified.rights.read.contains("inbox.bob"))
        #expect(verified.rights.write.contains("inbox.alice"))
        #expect(!verified.rights.write.contains("news.eu"))
        #expect(verified.rights.drop.isEmpty)
        #expect(!verified.rights.admin)
    }

    @Test(arguments: [
        ("alg_none", "unsigned token (alg none)"), ("confusion", "not for alg HS256"), ("wrong_key", "bad signature"),
        ("unknown_kid", "unknown key id 'nope'"), ("expired", "expired"), ("noexp", "no exp"),
        ("nbf_future", "not valid yet"), ("altered", "bad signature"),
    ])
    func badTokensAreRefusedForTheirReason(_ name: String, _ reason: String) async throws {
        let verifier = try await verifier()
        let given = try token(name)
        #expect {
            try verifier.verify(given, now: Self.now)
        } throws: { error in
            (error as? TokenRefusal)?.description.contains(reason) == true
        }
    }

    @Test func expiryHasItsLeeway() async throws {
        let verifier = try await verifier()
        let expired = try token("expired")
        // exp is 1,000,000,000; the leeway is 5 s.
        #expect((try? verifier.verify(expired, now: 1_000_000_005)) != nil)
        #expect((try? verifier.verify(expired, now: 1_000_000_006)) == nil)
    }

    @Test func audienceAndIssuerAreCheckedWhenSet() async throws {
        let token = try token("aud_iss")
        let both = try await verifier(audience: "diffcast", issuer: "backend")
        let otherAudience = try await verifier(audience: "other")
        let otherIssuer = try await verifier(issuer: "other")
        let audience = try await verifier(audience: "diffcast")
        #expect((try? both.verify(token, now: Self.now)) != nil)
        #expect((try? otherAudience.verify(token, now: Self.now)) == nil)
        #expect((try? otherIssuer.verify(token, now: Self.now)) == nil)
        // A token without aud is refused where an audience is required.
        #expect((try? audience.verify(try self.token("hs"), now: Self.now)) == nil)
    }

    @Test func garbageIsRefusedWithoutCrashing() async throws {
        let verifier = try await verifier()
        var generator = SystemRandomNumberGenerator()
        for length in [0, 1, 2, 3, 100, 8192, 8193, 100_000] {
            let text = String(
                (0..<length).map { _ in Character(UnicodeScalar(UInt8.random(in: 33...126, using: &generator))) })
            #expect(throws: TokenRefusal.self) { try verifier.verify(text, now: Self.now) }
            #expect(throws: TokenRefusal.self) { try verifier.verify(text + "." + text + "." + text, now: Self.now) }
        }
    }

    @Test func keySetsRefuseWhatTheyCannotUse() async {
        let cases: [(String, String)] = [
            (#"{"keys":[]}"#, "holds no key"),
            (#"{"keys":[{"kty":"oct","k":"c2hvcnQ"}]}"#, "at least 32 bytes"),
            (
                #"{"keys":[{"kty":"oct","alg":"RS256","k":"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8"}]}"#,
                "does not fit"
            ),
            (#"{"keys":[{"kty":"EC","crv":"P-384","x":"AA","y":"AA"}]}"#, "not supported"),
            (#"{"keys":[{"kty":"RSA","n":"AQAB"}]}"#, "not a usable RSA key"),
            (
                #"{"keys":[{"kty":"oct","use":"enc","k":"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8"}]}"#,
                "not for signatures"
            ),
            ("[1,2]", "expected a JSON Web Key Set"),
            ("{", "not JSON"),
        ]
        for (json, reason) in cases {
            do {
                _ = try await KeySet(json: Array(json.utf8), source: "keys.json")
                Issue.record("\(json) was accepted")
            } catch {
                #expect(error.description.contains(reason), "\(json): \(error)")
            }
        }
    }

    @Test func mintedTokensVerify() async throws {
        let key = #"{"kty":"oct","kid":"hs","k":"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8"}"#
        var rights = Rights()
        rights.read = CollectionScope([try CollectionPattern(parsing: "inbox.bob")])
        let claims = TokenMinter.Claims(subject: "bob", rights: rights, issuedAt: Self.now, expiresAt: Self.now + 60)
        let minted = try await TokenMinter.mint(claims, keyJSON: Array(key.utf8))
        let verifier = try await verifier()
        let verified = try verifier.verify(minted, now: Self.now)
        #expect(verified.subject == "bob")
        #expect(verified.rights == rights)
        #expect((try? verifier.verify(minted, now: Self.now + 66)) == nil)
    }
}

import DiffcastAccess
import DiffcastWire

extension FuzzTargets {
    /// What a client or an operator hands the daemon for scoped access: a token (`auth`, a Bearer
    /// header, `?token=`), a key set (`auth_keys`), a rights claim (`auth_anonymous`). The first
    /// byte picks which. Oracles: nothing traps; a token verifies the same way twice; a token that
    /// verifies was signed by one of the keys (so it is one of the corpus' valid ones, whose rights
    /// are known); a refusal says why.
    public static func token(_ input: UnsafeRawBufferPointer) {
        var bytes = Array(input)
        guard !bytes.isEmpty else { return }
        switch bytes.removeFirst() % 3 {
        case 0:
            let text = String(decoding: bytes, as: UTF8.self)
            let verifier = TokenFuzzing.verifier
            let first = Result { () throws(TokenRefusal) in try verifier.verify(text, now: 1_000_000_500) }
            let second = Result { () throws(TokenRefusal) in try verifier.verify(text, now: 1_000_000_500) }
            switch (first, second) {
            case (.success(let token), .success(let again)):
                if token != again { Fuzz.failure("a token verified two ways") }
                if token.subject != "alice" || !token.rights.write.contains("inbox.alice") {
                    Fuzz.failure("a token none of the keys signed was accepted")
                }
            case (.failure(let refusal), .failure):
                if refusal.description.isEmpty { Fuzz.failure("a refusal without a reason") }
            default:
                Fuzz.failure("a token verified once and refused once")
            }
        case 1:
            if let keys = try? KeySet.parse(json: bytes, source: "keys.json") {
                if keys.keys.isEmpty { Fuzz.failure("a key set without keys was accepted") }
                for key in keys.keys where !KeySet.supportedAlgorithms.contains(key.algorithm) {
                    Fuzz.failure("a key for \(key.algorithm) was accepted")
                }
            }
        default:
            _ = try? Rights(claimText: String(decoding: bytes, as: UTF8.self))
        }
    }
}

/// The key set the tokens are verified against: the public keys of Tests/Vectors/tokens.json.
enum TokenFuzzing {
    static let verifier: TokenVerifier = {
        let json =
            #"{"keys":[{"kty":"oct","kid":"hs","alg":"HS256","k":"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8"},{"kty":"RSA","key_ops":["verify"],"n":"utx3iYknC0CkRCiLD_Me3Ijk7hpHXUwAxH9Wt3oa8T9FmjJoX88mdtVRwzgb3YJRoBlRSj-XjY-CosUZ-Er62K2uPddGBCpb4Ug7iwjyz-g5eb8lM-Y1_fcAjH2NVT9VhNViSBAns0hjhlWkd-hpCV_efroAG5I9wKXmZFS6WcOGF_W5uYB3AB0kGaCM3zZmZ2UiNP6kQIh_IQYGmqpH-Glg9kgMzDeMx7oY85mPaSIiGeW4-4iiApoRPOSVljMrYkygxbYEcZqQV6zABPtoDblcG9cUUvmioaoltm1EaXtm8-xxi8EjF1MMqpckGA_nssGTCGARHjhSoIEg2jYmvQ","e":"AQAB","kid":"rs","alg":"RS256"},{"kty":"EC","crv":"P-256","x":"fPCa4oHGlVNM3cBcQ6sftiBRG5K-WPUIFCrMToD2iaM","y":"FTHZcX-jypvz5rIaqs87Q04chH-aulloD82z5MwrkOk","kid":"es","alg":"ES256"},{"x":"FA_EWMUGMRBqJACjJ4izVgGIBFlvC48OhsXgUQX_6e8","kty":"OKP","crv":"Ed25519","kid":"ed","alg":"EdDSA"}]}"#
        guard let keys = try? KeySet.parse(json: Array(json.utf8), source: "tokens.json") else {
            Fuzz.failure("the fixed key set does not load")
        }
        return TokenVerifier(keys: keys)
    }()
}

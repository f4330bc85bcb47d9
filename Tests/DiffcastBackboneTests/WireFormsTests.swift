import DiffcastEngine
import Testing

@testable import DiffcastBackbone

/// The two text forms the backbone puts on NATS: collection names as subject tokens and KV keys,
/// and a forwarded batch's reply.
@Suite struct WireFormsTests {
    /// NATS subject tokens may not hold `.`, `*`, `>` or whitespace; KV keys allow only
    /// `[-/_=.a-zA-Z0-9]`. The token must keep every name apart.
    @Test func everyNameIsOneSafeTokenAndNoTwoNamesShareOne() {
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=".unicodeScalars)
        var names = [
            "", "feed", "a.b", "a>b", "*", ">", "a b", "a\tb", "=", "=3D", "=2E", "é", "e\u{301}", "日本", "😀",
            "a/b", "..", "feed-1_x",
        ]
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("a.=>* é\u{301}Z9_-/😀")
        for _ in 0..<2000 {
            names.append(
                String(
                    (0..<Int.random(in: 0...6, using: &generator)).map { _ in
                        alphabet[Int.random(in: 0..<alphabet.count, using: &generator)]
                    }))
        }
        var owners: [String: String] = [:]
        for name in names {
            let token = SubjectToken.encode(name)
            #expect(!token.isEmpty)
            #expect(token.unicodeScalars.allSatisfy(allowed.contains), "\(token)")
            if let other = owners[token] { #expect(other == name, "'\(other)' and '\(name)' share \(token)") }
            owners[token] = name
        }
        // Canonically equal spellings stay apart: the daemon keeps names as bytes.
        #expect(SubjectToken.encode("é") == "=C3=A9")
        #expect(SubjectToken.encode("e\u{301}") == "e=CC=81")
        #expect(SubjectToken.encode("a.b") == "a=2Eb")
    }

    @Test func aReplyComesBackAsItWasSent() throws {
        let responses: [[UInt8]] = [
            Array(#"{"ok":true,"version":7}"#.utf8) + [10],
            Array(#"{"ok":false,"error":{"code":"duplicate_identifier","message":"a\nb"}}"#.utf8) + [10],
        ]
        let bytes = ForwardWire.encode(.answered(sequence: 42, responses: responses))
        #expect(String(decoding: bytes, as: UTF8.self).hasPrefix("{\"sequence\":42}\n{\"ok\":true,\"version\":7}\n"))
        guard case .answered(let sequence, let decoded)? = ForwardWire.decode(bytes) else {
            Issue.record("not decoded as an answer")
            return
        }
        #expect(sequence == 42)
        #expect(decoded == responses)
        guard case .notOwner(let owner)? = ForwardWire.decode(ForwardWire.encode(.notOwner(owner: "n-1"))),
            case .notOwner(nil)? = ForwardWire.decode(ForwardWire.encode(.notOwner(owner: nil))),
            case .unavailable(let reason)? = ForwardWire.decode(ForwardWire.encode(.unavailable("why \"so\"")))
        else {
            Issue.record("a refusal did not come back")
            return
        }
        #expect(owner == "n-1")
        #expect(reason == "why \"so\"")
        #expect(ForwardWire.decode(Array("not json".utf8)) == nil)
        #expect(ForwardWire.decode(Array(#"{"other":1}"#.utf8)) == nil)
    }
}

import DiffcastAccess
import DiffcastCore
import DiffcastWire
import Testing

/// The pattern matcher against SPEC.md's cases, and the one decision every transport asks:
/// each right permits its ops on matching names and nothing else.
@Suite struct HolderTests {
    @Test(arguments: [
        ("news.>", "news.eu", true), ("news.>", "news.eu.fr", true), ("news.>", "news", false),
        ("news.*", "news.eu", true), ("news.*", "news.eu.fr", false), ("news.*", "news", false),
        ("*", "inbox", true), ("*", "inbox.alice", false), (">", "a", true), (">", "a.b.c", true),
        ("inbox.alice", "inbox.alice", true), ("inbox.alice", "inbox.alicex", false),
        ("inbox.alice", "inbox", false), ("inbox.*.unread", "inbox.bob.unread", true),
        ("inbox.*.unread", "inbox.bob.read", false), ("a.*.>", "a.b", false), ("a.*.>", "a.b.c", true),
    ])
    func patternsMatchTokenByToken(_ pattern: String, _ name: String, _ matches: Bool) throws {
        #expect(try CollectionPattern(parsing: pattern).matches(name) == matches)
    }

    /// Every pattern of up to three tokens from `a`, `ab`, `*` and a last `>`, against every name
    /// of up to four tokens from `a`, `ab`, `b` and the empty one: the matcher agrees with a
    /// reference that splits both at `.` and matches token by token (SPEC.md "Scoped access").
    @Test func patternsMatchAsTheReferenceMatches() throws {
        func reference(_ pattern: [String], _ name: [String]) -> Bool {
            guard let first = pattern.first else { return name.isEmpty }
            if first == ">" { return !name.isEmpty }
            guard let token = name.first, first == "*" || first == token else { return false }
            return reference(Array(pattern.dropFirst()), Array(name.dropFirst()))
        }
        func sequences(of tokens: [String], upTo length: Int) -> [[String]] {
            var all: [[String]] = []
            var longest: [[String]] = [[]]
            for _ in 1...length {
                longest = longest.flatMap { prefix in tokens.map { prefix + [$0] } }
                all += longest
            }
            return all
        }
        let patterns = sequences(of: ["a", "ab", "*", ">"], upTo: 3).filter { !$0.dropLast().contains(">") }
        let names = sequences(of: ["a", "ab", "b", ""], upTo: 4)
        var matched = 0
        for pattern in patterns {
            let compiled = try CollectionPattern(parsing: pattern.joined(separator: "."))
            for name in names {
                let expected = reference(pattern, name)
                #expect(compiled.matches(name.joined(separator: ".")) == expected, "\(pattern) \(name)")
                if expected { matched += 1 }
            }
        }
        #expect(matched > 100)
    }

    @Test(arguments: ["", "a..b", ".a", "a.", ">.a", "a.>.b"])
    func malformedPatternsAreRefused(_ pattern: String) {
        #expect(throws: PatternError.self) { try CollectionPattern(parsing: pattern) }
    }

    @Test func rightsClaimsRefuseUnknownKeysAndWrongTypes() {
        for text in [#"{"raed":["a"]}"#, #"{"read":"a"}"#, #"{"read":[1]}"#, #"{"admin":"yes"}"#, "[]", "x"] {
            #expect(throws: PatternError.self) { try Rights(claimText: text) }
        }
    }

    func token(_ claim: String, sub: String = "alice") throws -> Credential {
        .token(VerifiedToken(subject: sub, rights: try Rights(claimText: claim), expiresAt: 0, text: ""))
    }

    static let writes: [WriteOperation] = [.deleteAll]

    func commands(on name: String) -> [(Command, Right?)] {
        [
            (.ping, nil), (.auth(token: "x"), nil),
            (.get(collection: name), .read), (.subscribe(collection: name, since: nil, epoch: nil), .read),
            (.window(collection: name, .first(1)), .read), (.unsubscribe(collection: name), .read),
            (.write(collection: name, .deleteAll), .write), (.drop(collection: name), .drop),
            (.stats, .admin),
        ]
    }

    @Test(arguments: [Right.read, .write, .drop])
    func eachRightPermitsItsOpsOnMatchingNamesOnly(_ right: Right) throws {
        let holder = Holder(try token(#"{"\#(right.rawValue)":["inbox.alice"]}"#), anonymous: .none)
        for (command, needed) in commands(on: "inbox.alice") {
            let refusal = holder.refusal(of: command, op: "op")
            #expect((refusal == nil) == (needed == nil || needed == right), "\(command)")
            if let refusal {
                #expect(refusal.message.contains("token for 'alice' may not"))
                #expect(refusal.right == needed)
            }
        }
        for (command, needed) in commands(on: "inbox.bob") where needed != nil {
            let refusal = holder.refusal(of: command, op: "op")
            #expect(refusal != nil, "\(command)")
            if needed != .admin { #expect(refusal?.message.contains("'inbox.bob'") == true) }
        }
    }

    @Test func adminPermitsEverything() throws {
        let holder = Holder(try token(#"{"admin":true}"#), anonymous: .none)
        for (command, _) in commands(on: "any.thing") { #expect(holder.refusal(of: command, op: "op") == nil) }
        #expect(holder.readable == nil)
    }

    @Test func anonymousRightsJoinATokens() throws {
        let anonymous = try Rights(claimText: #"{"read":["public.>"]}"#)
        let nobody = Holder(.anonymous, anonymous: anonymous)
        #expect(nobody.refusal(of: .get(collection: "public.score"), op: "get") == nil)
        #expect(nobody.refusal(of: .get(collection: "inbox.alice"), op: "get") != nil)
        #expect(nobody.refusal(of: .write(collection: "public.score", .deleteAll), op: "delete_all") != nil)
        #expect(!nobody.presentedToken)
        let alice = Holder(try token(#"{"read":["inbox.alice"]}"#), anonymous: anonymous)
        #expect(alice.refusal(of: .get(collection: "public.score"), op: "get") == nil)
        #expect(alice.refusal(of: .get(collection: "inbox.alice"), op: "get") == nil)
        #expect(alice.readable?.contains("public.x") == true && alice.readable?.contains("inbox.alice") == true)
        #expect(alice.readable?.contains("inbox.bob") == false)
        #expect(alice.presentedToken)
    }

    @Test func listNeedsATokenOrSomeRightToRead() throws {
        #expect(Holder(.anonymous, anonymous: .none).refusal(of: .list(), op: "list") != nil)
        let writer = Holder(try token(#"{"write":["a"]}"#), anonymous: .none)
        #expect(writer.refusal(of: .list(), op: "list") == nil)
        #expect(writer.readable == CollectionScope())
        #expect(Holder(try token(#"{"read":["a"]}"#), anonymous: .none).refusal(of: .list(), op: "list") == nil)
        #expect(Holder(.everything, anonymous: .none).readable == nil)
    }

    @Test func onlyAWriterCreatesBySubscribing() throws {
        let reader = Holder(try token(#"{"read":["a"]}"#), anonymous: .none)
        let writer = Holder(try token(#"{"read":["a"],"write":["a"]}"#), anonymous: .none)
        #expect(!reader.mayCreate("a"))
        #expect(writer.mayCreate("a"))
        let readOnlyPeer = Holder(.peer(PeerAccess(mayWrite: false, mayRead: true, userID: 1000)), anonymous: .none)
        #expect(!readOnlyPeer.mayCreate("a"))
        #expect(readOnlyPeer.refusal(of: .get(collection: "a"), op: "get") == nil)
        #expect(readOnlyPeer.refusal(of: .drop(collection: "a"), op: "drop")?.message.contains("uid 1000") == true)
    }
}

import DiffcastAccess
import DiffcastCore
import DiffcastWire
import Testing

@testable import DiffcastServer

/// The line checks of the request chain as a table written out by hand: each request line, for
/// each holder, over a transport that carries events and over plain HTTP, runs or is refused for
/// the right the table names. Over plain HTTP a `subscribe` is refused for its transport, but
/// only after the rights: a holder that may not read it learns that first.
@Suite struct RequestCheckTests {
    /// What a line gets from the chain: runs, refused for lacking a right, or refused for its
    /// transport.
    enum Expected: Equatable, CustomStringConvertible {
        case runs
        case lacks(Right)
        case unsupported

        var description: String {
            switch self {
            case .runs: "runs"
            case .lacks(let right): "lacks \(right.rawValue)"
            case .unsupported: "unsupported"
            }
        }
    }

    static func token(_ claim: String) throws -> Holder {
        let rights = try Rights(claimText: claim)
        return Holder(.token(VerifiedToken(subject: "alice", rights: rights, expiresAt: 0, text: "")), anonymous: .none)
    }

    /// The holders, in the order of the table's columns.
    static func holders() throws -> [(name: String, holder: Holder)] {
        [
            ("reader of a", try token(#"{"read":["a"]}"#)),
            ("writer of a", try token(#"{"read":["a"],"write":["a"]}"#)),
            ("anonymous", Holder(.anonymous, anonymous: .none)),
            ("daemon token", Holder(.everything, anonymous: .none)),
        ]
    }

    /// Each line with what it gets over a transport that carries events, one column per holder.
    static let table: [(line: String, expected: [Expected])] = [
        ("ping", [.runs, .runs, .runs, .runs]),
        (#"{"op":"auth","token":"x"}"#, [.runs, .runs, .runs, .runs]),
        (#"{"op":"get","collection":"a"}"#, [.runs, .runs, .lacks(.read), .runs]),
        (#"{"op":"subscribe","collection":"a"}"#, [.runs, .runs, .lacks(.read), .runs]),
        (#"{"op":"subscribe","collection":"b"}"#, [.lacks(.read), .lacks(.read), .lacks(.read), .runs]),
        (#"{"op":"unsubscribe","collection":"b"}"#, [.lacks(.read), .lacks(.read), .lacks(.read), .runs]),
        (#"{"op":"window","collection":"a","window":{"first":5}}"#, [.runs, .runs, .lacks(.read), .runs]),
        (#"{"op":"append_items","collection":"a","items":["x"]}"#, [.lacks(.write), .runs, .lacks(.write), .runs]),
        (#"{"op":"drop","collection":"a"}"#, [.lacks(.drop), .lacks(.drop), .lacks(.drop), .runs]),
        (#"{"op":"list"}"#, [.runs, .runs, .lacks(.read), .runs]),
        (#"{"op":"stats"}"#, [.lacks(.admin), .lacks(.admin), .lacks(.admin), .runs]),
    ]

    static func outcome(_ line: String, _ holder: Holder, carriesEvents: Bool) throws -> Expected {
        let request = try RequestParser().parse(line: Array(line.utf8))
        switch LineCheck.refusal(of: request, by: holder, carriesEvents: carriesEvents) {
        case nil: return .runs
        case .unauthorized(let refusal): return .lacks(refusal.right)
        case .unsupported(let error):
            #expect(error.code == "invalid_argument" && error.message.contains("/v1/ws"))
            return .unsupported
        }
    }

    @Test func eachLineRunsOrIsRefusedAsTheTableSays() throws {
        let holders = try Self.holders()
        for (line, expected) in Self.table {
            for (column, (name, holder)) in holders.enumerated() {
                #expect(try Self.outcome(line, holder, carriesEvents: true) == expected[column], "\(name): \(line)")
            }
        }
    }

    @Test func overPlainHTTPASubscribeIsRefusedForItsTransportAfterItsRights() throws {
        let holders = try Self.holders()
        for (line, expected) in Self.table {
            let isSubscribe = line.contains(#""op":"subscribe""#)
            for (column, (name, holder)) in holders.enumerated() {
                let overHTTP: Expected = isSubscribe && expected[column] == .runs ? .unsupported : expected[column]
                #expect(try Self.outcome(line, holder, carriesEvents: false) == overHTTP, "\(name): \(line)")
            }
        }
    }

    @Test func onlyAPlainHTTPResponseCannotCarryEvents() {
        #expect(Transport.lines.carriesEvents)
        #expect(Transport.eventStream.carriesEvents)
        #expect(!Transport.http(HTTPExchanges(reader: .init(maximumHeadBytes: 1, maximumBodyBytes: 1))).carriesEvents)
    }
}

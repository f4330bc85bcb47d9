import DiffcastCore
import DiffcastWire

@testable import DiffcastBackbone
@testable import DiffcastEngine
@testable import DiffcastStorage

extension FuzzTargets {
    /// Shared-log messages as a daemon of a backbone follows them (`NATSBackbone`'s subscription:
    /// the collection from the subject, `SubjectToken.decode`; the records from
    /// `LogRecord.records(inPayload:)`, none when that fails; then `SharedLogApplier.apply`: the
    /// skip rule, `ApplyEngine.fits`, a snapshot when the message does not fit,
    /// `ApplyEngine.follow`). Each message is applied in a drain of its own, and every event the
    /// engine publishes is checked by a subscriber's mirror.
    ///
    /// Input: parts separated by NUL bytes, each a message with a tag byte:
    /// - `S`: the rest is the collection snapshot the backbone returns from then on when the engine
    ///   asks for one (`loadSnapshot`), to recover from a message that does not fit;
    /// - `J`: the rest is a snapshot handed over at join (`BackboneStart.snapshots`), before all else;
    /// - `@`: the rest is a subject token (`diffcast.log.<token>`), a line feed, and the payload;
    /// - anything else: the whole part is a log message payload, on the subject of its first
    ///   record's collection, as an owner appends it (sequence numbers 1, 2, …).
    public static func sharedLogMessage(_ input: UnsafeRawBufferPointer) {
        let parts = Fuzz.parts(Array(input), separator: 0)
        let follower = SharedLogFollower()
        let joining = parts.filter { $0.first == UInt8(ascii: "J") }.map { Array($0.dropFirst()) }
        var sequence = follower.join(joining, lastSequence: 1000)
        for part in parts {
            switch part.first {
            case UInt8(ascii: "J"):
                continue
            case UInt8(ascii: "S"):
                follower.backbone.snapshot = Array(part.dropFirst())
            default:
                // As NATSBackbone delivers it: a payload that does not decode arrives empty.
                var token: Substring?
                var payload = part
                if part.first == UInt8(ascii: "@") {
                    let cut = part.firstIndex(of: UInt8(ascii: "\n")) ?? part.endIndex
                    token = Substring(decoding: part[1..<cut], as: UTF8.self)
                    payload = Array(part[min(cut + 1, part.endIndex)...])
                }
                let records = LogRecord.records(inPayload: payload) ?? []
                let collection = token.map { SubjectToken.decode($0) } ?? records.first.map(\.collection)
                sequence += 1
                follower.deliver(records, sequence: sequence, collection: collection)
            }
        }
        let engine = follower.engine
        probeEveryCollection(of: engine)
        checkCheckpointRoundTrip(of: engine, "the follower")
    }
}

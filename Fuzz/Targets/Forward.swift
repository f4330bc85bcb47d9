import DiffcastCore
import DiffcastWire

@testable import DiffcastBackbone
@testable import DiffcastEngine
@testable import DiffcastStorage

extension FuzzTargets {
    /// Forwarding between daemons of a backbone, both ends:
    ///
    /// 1. the owner serves a forwarded request (`NATSBackbone` splits its payload into lines,
    ///    `SharedLogApplier.serve` parses and applies them, appends the records to the log and
    ///    replies); its reply must survive `ForwardWire` (encode, decode), the snapshots it saves
    ///    must decode to its state, and a follower of the log it appended must reach its state;
    /// 2. the daemon that forwarded reads a reply (`ForwardWire.decode`, then `SharedLogApplier`
    ///    answers its clients from the owner's responses).
    ///
    /// Input: the forwarded request payload, then optionally a NUL byte and the reply bytes (when
    /// absent, the owner's own reply is used).
    public static func forward(_ input: UnsafeRawBufferPointer) {
        let cut = input.firstIndex(of: 0)
        let request = Array(input[..<(cut ?? input.endIndex)])
        let lines = request.split(separator: UInt8(ascii: "\n")).map(Array.init)

        // 1. The owner.
        let owner = ApplyEngine(historyLimits: HistoryLimits(versions: 4, items: 256), makeEpoch: Fuzz.countingEpochs())
        let ownerBackbone = FakeBackbone(node: "owner")
        let ownerApplier = SharedLogApplier(
            engine: owner, backbone: ownerBackbone, node: "owner", snapshotEvery: 2, logger: Fuzz.silentLogger)
        let replied = Box<ForwardReply?>(nil)
        ownerBackbone.arrivals.forwarded = [ForwardedBatch(lines: lines) { replied.value = $0 }]
        _ = ownerApplier.run([])
        guard let reply = replied.value else { Fuzz.failure("a forwarded batch got no reply") }
        let encoded = ForwardWire.encode(reply)
        guard let decoded = ForwardWire.decode(encoded), same(decoded, reply) else {
            Fuzz.failure("a reply does not survive ForwardWire: \(String(decoding: encoded, as: UTF8.self))")
        }
        for saved in ownerBackbone.savedSnapshots {
            guard let snapshot = SharedLogSnapshot(decoding: saved.bytes), snapshot.name == saved.name,
                snapshot.logSequence == saved.sequence
            else { Fuzz.failure("a saved snapshot does not decode: \(String(decoding: saved.bytes, as: UTF8.self))") }
        }
        let follower = ApplyEngine()
        for message in ownerBackbone.appended {
            guard let records = LogRecord.records(inPayload: message.payload) else {
                Fuzz.failure("an appended message does not decode: \(String(decoding: message.payload, as: UTF8.self))")
            }
            _ = follower.follow(records)
        }
        guard Summary(follower) == Summary(owner) else {
            Fuzz.failure("the follower holds [\(Summary(follower))], the owner [\(Summary(owner))]")
        }

        // 2. The daemon that forwarded, reading the reply.
        let replyBytes = cut.map { Array(input[(input.index(after: $0))...]) } ?? encoded
        let forwarder = ApplyEngine(makeEpoch: Fuzz.countingEpochs())
        let forwarderBackbone = FakeBackbone(node: "forwarder")
        forwarderBackbone.claim = .heldBy("owner")
        // As NATSBackbone.forward reads a reply.
        forwarderBackbone.answer = { forwarded in
            switch ForwardWire.decode(replyBytes) {
            case .answered(let sequence, let responses)?:
                guard responses.count == forwarded.count else { return .unavailable("the owner answered out of step") }
                return .answered(sequence: sequence, responses: responses)
            case .notOwner?: return .unavailable("the owner keeps changing")
            case .unavailable(let reason)?: return .unavailable(reason)
            case nil: return .unavailable("the owner's answer does not parse")
            }
        }
        let forwarderApplier = SharedLogApplier(
            engine: forwarder, backbone: forwarderBackbone, node: "forwarder", snapshotEvery: 2,
            logger: Fuzz.silentLogger)
        var jobs: [Job] = []
        for (slot, line) in lines.enumerated() {
            guard let request = parseRequest(line) else { continue }
            jobs.append(.request(request, ResponseAddress(connection: 1, slot: UInt64(slot))))
        }
        _ = forwarderApplier.run(jobs)
    }
}

private func same(_ left: ForwardReply, _ right: ForwardReply) -> Bool {
    switch (left, right) {
    case (.answered(let a, let x), .answered(let b, let y)): a == b && x == y
    case (.notOwner(let a), .notOwner(let b)): a == b
    case (.unavailable(let a), .unavailable(let b)): a == b
    default: false
    }
}

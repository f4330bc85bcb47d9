import DiffcastCore
import DiffcastWire

/// The owner's side of forwarding: requests another daemon sent, applied here and answered.
extension SharedLogApplier {
    /// Applies requests another daemon forwarded, as this collection's owner, and answers them.
    func serve(_ batch: ForwardedBatch) {
        let parser = engine.lineParser
        var requests: [Request] = []
        for line in batch.lines {
            guard let request = try? parser.parse(line: line) else {
                return batch.reply(.unavailable("a forwarded line does not parse"))
            }
            requests.append(request)
        }
        guard let name = requests.first?.command.collection,
            requests.allSatisfy({ $0.command.collection == name })
        else { return batch.reply(.unavailable("a forwarded batch names more than one collection")) }
        let jobs = requests.enumerated().map { slot, request in
            Job.request(request, ResponseAddress(connection: Self.forwardedConnection, slot: UInt64(slot)))
        }
        switch backbone.claim(name) {
        case .owned(let catchUpTo):
            if let catchUpTo { waitForLog(through: catchUpTo, timeoutMilliseconds: Self.logWaitMilliseconds) }
            guard let produced = writeAsOwner(jobs, of: name) else { return batch.reply(.notOwner(owner: nil)) }
            var responses = [[UInt8]](repeating: [], count: requests.count)
            for outcome in produced {
                switch outcome {
                case .response(let address, let response) where address.connection == Self.forwardedConnection,
                    .subscribed(let address, _, _, _, let response, _)
                where address.connection == Self.forwardedConnection:
                    responses[Int(address.slot)] = response.bytes.bytes
                case .acknowledged(let address, let response, _, let writes)
                where address.connection == Self.forwardedConnection:
                    let first = Int(address.slot)
                    for slot in first..<(first + writes) { responses[slot] = response.bytes.bytes }
                default:
                    outcomes.append(outcome)
                }
            }
            batch.reply(.answered(sequence: logPosition[name] ?? 0, responses: responses))
        case .heldBy(let owner):
            batch.reply(.notOwner(owner: owner))
        case .notOwned(let reason):
            batch.reply(.unavailable(reason))
        }
    }
}

import DiffcastCore
import DiffcastWire

/// A daemon that does not own a collection sends its requests to the owner, and answers them
/// once the log through the owner's answer has been applied here.
extension SharedLogApplier {
    /// Sends a collection's requests to its owner; answers them with the owner's answers once
    /// this daemon has applied the log through them. A subscription is made here, after its
    /// collection exists.
    func forward(_ jobs: [Job], of name: String, ownerHint: String?) {
        let requests = jobs.compactMap { job -> (Request, ResponseAddress)? in
            guard case .request(let request, let address) = job else { return nil }
            return (request, address)
        }
        writesForwarded += UInt64(requests.count { if case .write = $0.0.command { true } else { false } })
        let result = backbone.forward(
            requests.map(\.0.line), of: name, ownerHint: ownerHint, serving: { self.serveArrivals() })
        switch result {
        case .unavailable(let reason):
            refuse(jobs, because: reason)
        case .answered(let sequence, let responses):
            waitForLog(through: sequence, timeoutMilliseconds: Self.logWaitMilliseconds)
            let logHoldsTheAnswer = appliedThrough >= sequence
            // A log whose end cannot be read cannot vouch for the answer either.
            let end = logHoldsTheAnswer ? sequence : (try? backbone.logEnd()) ?? 0
            if sequence > end {
                logger.error(
                    "a forwarded batch's answer names a log message past the log's end; refused",
                    metadata: ["collection": "\(name)", "sequence": "\(sequence)", "log_end": "\(end)"])
                return refuse(
                    jobs, because: "the owner's answer cannot be trusted; the write may or may not be applied")
            }
            var answers = responses.makeIterator()
            for job in jobs {
                guard case .request(let request, let address) = job else {
                    outcomes += engine.process([job])
                    continue
                }
                guard let line = answers.next() else { continue }
                switch request.command {
                case .write, .subscribe: break
                default:
                    outcomes.append(.relayed(address, SharedBytes(line)))
                    continue
                }
                let depth = engine.lineParser.limits.maximumDepth
                guard let response = try? ResponseDecoder.response(line, maximumDepth: depth) else {
                    refuse([job], because: "the owner's answer cannot be read; the write may or may not be applied")
                    continue
                }
                let relayed = Encoded(response, bytes: SharedBytes(line))
                if case .subscribe = request.command, response.isSuccess {
                    subscribeAfterForwarding(job, to: name)
                } else if case .write = request.command, response.isSuccess, let version = response.version {
                    // Once the log through the answer is applied here, its version has been
                    // published here too: the answer waits for nothing later (a version past
                    // what the log holds would hold this connection's answers back for good).
                    let held = engine.position(of: name)?.version ?? 0
                    let mark = VersionMark(collection: name, version: logHoldsTheAnswer ? min(version, held) : version)
                    outcomes.append(.acknowledged(address, relayed, mark, writes: 1))
                } else {
                    outcomes.append(.response(address, relayed))
                }
            }
        }
    }

    /// A subscription is made here once its collection, made by the owner, has arrived.
    func subscribeAfterForwarding(_ job: Job, to name: String) {
        guard engine.holds(name) else {
            // The owner made it, but its log has not reached this daemon in time.
            return refuse([job], because: "collection '\(name)' is not here yet; retry")
        }
        outcomes += engine.process([job])
        _ = engine.commitLastBatch()
    }

    /// Answers every request among `jobs` `unavailable`; catch-ups still run here.
    func refuse(_ jobs: [Job], because reason: String) {
        for job in jobs {
            guard case .request(let request, let address) = job else {
                outcomes += engine.process([job])
                continue
            }
            outcomes.append(.response(address, Encoded(.failure(id: request.id, op: request.op, .unavailable(reason)))))
        }
    }
}

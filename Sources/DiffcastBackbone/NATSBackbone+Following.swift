import DiffcastEngine
import Dispatch
import Synchronization

/// Following the shared log: every message arrives in the inbox, and a watch that notices a
/// follower gone silent reads what is missing through the stream's leader.
extension NATSBackbone {
    /// Follows the whole log from stream sequence `first`. A message that does not decode still
    /// arrives (without records), so that the log's end is reached and the applier says so.
    func followLog(from first: UInt64) throws -> SubscriptionHandle {
        try client.follow("diffcast.log.>", from: first) { [weak self] message in
            guard let self, !followerIsSilent else { return }
            receive(message)
        }
    }

    /// Takes a log message into the inbox, followed or read through the leader alike; one at or
    /// below the last that arrived is dropped.
    func receive(_ message: NATSClient.StreamMessage) {
        let token = message.subject.split(separator: ".", maxSplits: 2).dropFirst(2).first
        let collection = token.flatMap(SubjectToken.decode)
        let records = LogRecord.records(inPayload: message.data) ?? []
        let fresh = inbox.withLock { inbox in
            guard message.sequence > inbox.lastSequence else { return false }
            inbox.lastSequence = message.sequence
            inbox.arrivals.log.append(LogMessage(sequence: message.sequence, collection: collection, records: records))
            return true
        }
        if fresh { arrived() }
    }

    /// Reads the log's messages after the last that arrived through `end`, one sequence at a
    /// time from the stream's leader, for at most `repairMilliseconds`: a stalled follower's
    /// repair. A consumer recreated on a peer that lags (nats-server 2.9.10 places it on any
    /// peer) delivers nothing for as long as that peer lags, while the leader has every message.
    /// Sequences cut from the stream (before `first`, or purged behind a snapshot) cost one
    /// request each and bring nothing. Returns how many messages arrived this way.
    func readThroughLeader(first: UInt64, through end: UInt64) -> Int {
        let deadline = ContinuousClock.now + .milliseconds(Self.repairMilliseconds)
        var count = 0
        while !stopping.load(ordering: .relaxed), ContinuousClock.now < deadline {
            // The follower may have moved on meanwhile: never ask twice for what arrived.
            let sequence = max(first, inbox.withLock { $0.lastSequence } + 1)
            guard sequence <= end else { break }
            do {
                guard let message = try client.message(stream: Self.stream, sequence: sequence) else {
                    // Cut from the stream: nothing will arrive for it.
                    inbox.withLock { $0.lastSequence = max($0.lastSequence, sequence) }
                    continue
                }
                receive(message)
                count += 1
            } catch {
                logger.warning(
                    "shared log: reading it through the stream leader stopped",
                    metadata: ["sequence": "\(sequence)", "error": "\(error)"])
                break
            }
        }
        return count
    }

    func startWatchingTheLog() {
        let timer = DispatchSource.makeTimerSource(queue: watchQueue)
        let interval = DispatchTimeInterval.milliseconds(Self.followCheckMilliseconds)
        timer.schedule(deadline: .now() + interval, repeating: interval)
        timer.setEventHandler { [weak self] in self?.checkFollowing() }
        timer.resume()
        watchTimer = timer
    }

    /// Compares the last log message that arrived with the stream's end. A consumer whose
    /// server died can stay silent for a long time (libnats 3.4.1 notices only after missed
    /// heartbeats, and nats-server 2.9.10 may recreate it on the dead server), while the daemon
    /// serves stale collections: when the stream is ahead and nothing arrived for
    /// `stalledChecksBeforeRepair` checks, the missing messages are read through the stream's
    /// leader, and once they are all here the log is followed anew from the next sequence.
    func checkFollowing() {
        guard !stopping.load(ordering: .relaxed), let stream = try? client.sequences(stream: Self.stream) else {
            return
        }
        let arrived = inbox.withLock { $0.lastSequence }
        behind.store(stream.last > arrived ? stream.last - arrived : 0, ordering: .relaxed)
        if stream.last > arrived, arrived == watch.lastSequence {
            watch.stalledChecks += 1
        } else {
            watch.stalledChecks = 0
        }
        watch.lastSequence = arrived
        guard watch.stalledChecks >= Self.stalledChecksBeforeRepair else { return }
        logger.warning(
            "shared log: nothing arrived while the stream is ahead; reading it through the leader",
            metadata: ["arrived": "\(arrived)", "stream_end": "\(stream.last)"])
        let read = readThroughLeader(first: stream.first, through: stream.last)
        let reached = inbox.withLock { $0.lastSequence }
        behind.store(stream.last > reached ? stream.last - reached : 0, ordering: .relaxed)
        watch.lastSequence = reached
        // Out of time before the end: read on at the next check unless the follower moves.
        watch.stalledChecks = reached < stream.last && read > 0 ? Self.stalledChecksBeforeRepair - 1 : 0
        logger.warning(
            "shared log: read through the stream leader",
            metadata: ["messages": "\(read)", "from": "\(arrived + 1)", "reached": "\(reached)"])
        guard reached >= stream.last || read == 0, !stopping.load(ordering: .relaxed) else { return }
        do {
            let replacement = try followLog(from: reached + 1)
            if let stale = watch.subscription { client.stopFollowing(stale) }
            watch.subscription = replacement
        } catch {
            logger.error("shared log: could not follow it anew; retrying", metadata: ["error": "\(error)"])
        }
    }
}

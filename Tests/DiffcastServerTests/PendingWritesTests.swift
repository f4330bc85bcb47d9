import DiffcastEngine
import DiffcastTestSupport
import Testing

@testable import DiffcastServer

/// A connection's pending writes against a model kept apart from it: the buffers queued, in
/// order and by identity; the bytes queued and in flight, counted from the sizes alone; and the
/// answer flag's two laws (an answer queued is never missed, an empty queue holds none).
@Suite struct PendingWritesTests {
    private struct Model {
        var queued: [(bytes: SharedBytes, isAnswer: Bool)] = []
        var inFlight = 0
        var isWriting = false
        var queuedBytes: Int { queued.reduce(0) { $0 + $1.bytes.count } }
    }

    /// Debug builds check the counts after every change: a write finished that was never
    /// started (bytes in flight below zero) stops the process.
    @Test func aMiscountStopsADebugBuild() async {
        await #expect(processExitsWith: .failure) {
            var pending = PendingWrites()
            pending.writeFinished(bytes: 1)
        }
    }

    @Test(arguments: [1, 2, 3, 4] as [UInt64])
    func randomWritesKeepEveryByteCountedAndInOrder(seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        var pending = PendingWrites()
        var model = Model()
        for step in 0..<5_000 {
            switch Int.random(in: 0..<6, using: &rng) {
            case 0, 1:
                let bytes = SharedBytes(Array(repeating: 7, count: Int.random(in: 1...100, using: &rng)))
                let isAnswer = Int.random(in: 0..<4, using: &rng) == 0
                pending.append(bytes, isAnswer: isAnswer)
                model.queued.append((bytes, isAnswer))
            case 2 where !model.isWriting && !model.queued.isEmpty:
                // The write in progress: the first buffers, in order.
                let limit = Int.random(in: 1...5, using: &rng)
                let taken = pending.take(limit: limit)
                let expected = model.queued.prefix(limit).map(\.bytes)
                #expect(taken.count == expected.count && zip(taken, expected).allSatisfy { $0 === $1 }, "step \(step)")
                model.inFlight += expected.reduce(0) { $0 + $1.count }
                model.queued.removeFirst(expected.count)
                model.isWriting = true
            case 3 where model.isWriting && model.inFlight > 0:
                let part = Int.random(in: 0..<model.inFlight, using: &rng)
                pending.sent(bytes: part)
                model.inFlight -= part
            case 4 where model.isWriting:
                pending.writeFinished(bytes: model.inFlight)
                model.inFlight = 0
                model.isWriting = false
            case 5 where !model.isWriting && !model.queued.isEmpty:
                // A write that the kernel took whole at once, never in progress.
                let count = Int.random(in: 1...model.queued.count, using: &rng)
                let shown = pending.withQueued(limit: count) { Array($0) }
                #expect(zip(shown, model.queued.prefix(count)).allSatisfy { $0 === $1.bytes }, "step \(step)")
                let bytes = model.queued.prefix(count).reduce(0) { $0 + $1.bytes.count }
                pending.dropWritten(count, bytes: bytes)
                model.queued.removeFirst(count)
            default:
                if Int.random(in: 0..<50, using: &rng) == 0 {
                    pending.discardQueued()
                    model.queued = []
                }
            }
            #expect(pending.queued.count == model.queued.count, "step \(step)")
            #expect(zip(pending.queued, model.queued).allSatisfy { $0 === $1.bytes }, "step \(step)")
            #expect(pending.queuedBytes == model.queuedBytes, "step \(step)")
            #expect(pending.bytesInFlight == model.inFlight, "step \(step)")
            #expect(pending.unsentBytes == model.queuedBytes + model.inFlight, "step \(step)")
            #expect(pending.isWriting == model.isWriting, "step \(step)")
            #expect(pending.isEmpty == model.queued.isEmpty, "step \(step)")
            // The one-buffer write's view: the bytes of the only buffer queued, else none.
            let only = pending.onlyQueued
            if model.queued.count == 1 {
                let bytes = model.queued[0].bytes
                #expect(only?.baseAddress == UnsafeRawPointer(bytes.pointer), "step \(step)")
                #expect(only?.count == bytes.count, "step \(step)")
            } else {
                #expect(only == nil, "step \(step)")
            }
            if model.queued.contains(where: \.isAnswer) {
                #expect(pending.holdsAnswer, "step \(step): an answer is queued and would linger")
            }
            if model.queued.isEmpty { #expect(!pending.holdsAnswer, "step \(step): an empty queue holds an answer") }
        }
    }
}

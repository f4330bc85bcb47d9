import DiffcastTestSupport
import Testing

@testable import DiffcastCore

/// The chunk starts that store all but the first, against a plain array of every start.
@Suite struct ChunkStartsTests {
    @Test func randomOperationsMatchAPlainArray() {
        var rng = SplitMix64(seed: 27)
        var starts = ChunkStarts()
        var model: [Int] = []
        for _ in 0..<20_000 {
            switch Int.random(in: 0..<10, using: &rng) {
            case 0..<4:
                let start = model.isEmpty ? 0 : Int.random(in: 1..<1000, using: &rng)
                starts.append(start)
                model.append(start)
            case 4..<6 where !model.isEmpty:
                let chunk = Int.random(in: 0..<model.count, using: &rng)
                starts.remove(at: chunk)
                model.remove(at: chunk)
                if !model.isEmpty { model[0] = 0 }
            case 6 where !model.isEmpty:
                let chunk = Int.random(in: 0..<model.count, using: &rng)
                let pieces = Int.random(in: 1...4, using: &rng)
                starts.split(chunk, into: pieces)
                model.insert(contentsOf: repeatElement(0, count: pieces - 1), at: chunk + 1)
            case 7 where model.count > 1:
                let chunk = Int.random(in: 1..<model.count, using: &rng)
                let start = Int.random(in: 1..<1000, using: &rng)
                starts[chunk] = start
                model[chunk] = start
            case 8:
                let count = Int.random(in: 0..<5, using: &rng)
                starts = ChunkStarts(zeros: count)
                model = Array(repeating: 0, count: count)
            default:
                break
            }
            #expect(model.indices.map { starts[$0] } == model)
        }
    }
}

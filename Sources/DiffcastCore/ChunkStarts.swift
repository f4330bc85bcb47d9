/// The position of the first item of each chunk of an `ItemList`. The first chunk starts at 0,
/// so only the others are stored: a list of one chunk, as nearly every small collection is,
/// allocates nothing for them. No chunk is empty, so the first is the only one at 0.
struct ChunkStarts: Sendable {
    /// The starts of chunks 1, 2, …
    private var later: [Int] = []

    init() {}

    /// The starts of `count` chunks, all 0 until renumbered.
    init(zeros count: Int) {
        later = Array(repeating: 0, count: Swift.max(0, count - 1))
    }

    subscript(chunk: Int) -> Int {
        get { chunk == 0 ? 0 : later[chunk - 1] }
        // The first chunk's start is always 0: setting it changes nothing.
        set { if chunk > 0 { later[chunk - 1] = newValue } }
    }

    /// Adds the start of a new last chunk (0 only for the first).
    mutating func append(_ start: Int) {
        if start > 0 { later.append(start) }
    }

    /// Forgets the start of `chunk`; the starts after it must be renumbered.
    mutating func remove(at chunk: Int) {
        if !later.isEmpty { later.remove(at: Swift.max(0, chunk - 1)) }
    }

    /// Makes room for `pieces` chunks where `chunk` was; their starts must be renumbered.
    mutating func split(_ chunk: Int, into pieces: Int) {
        guard pieces > 1 else { return }
        later.insert(contentsOf: repeatElement(0, count: pieces - 1), at: chunk)
    }
}

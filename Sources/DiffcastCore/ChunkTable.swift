/// The chunk table of an item list, kept in pages of 64 chunks (every page full but the last).
///
/// Each published version keeps a snapshot, so the table is shared when the next write changes
/// a chunk. A flat array was then copied whole, a retain per chunk, and released whole when the
/// version was forgotten: work in proportion to the collection, for every version. Here a
/// change copies the one page it touches and the short table of pages. Inserting or removing a
/// chunk (a split, an emptied chunk) moves the chunks after it, as an array would.
struct ChunkTable: RandomAccessCollection, Sendable {
    private static let pageShift = 6
    private static let pageSize = 1 << pageShift

    /// Chunks 0..<64. Most collections hold one page, which then needs no table of pages (an
    /// idle one-item collection was 40 bytes and a malloc larger).
    private var firstPage: [ItemList.Chunk] = []
    /// Pages 1, 2, …: each full but the last.
    private var laterPages: [[ItemList.Chunk]] = []

    init() {}

    init(_ chunks: some Sequence<ItemList.Chunk>) {
        for chunk in chunks { append(chunk) }
    }

    var count: Int {
        guard let last = laterPages.last else { return firstPage.count }
        return laterPages.count << Self.pageShift + last.count
    }

    var startIndex: Int { 0 }
    var endIndex: Int { count }

    subscript(position: Int) -> ItemList.Chunk {
        precondition(position >= 0 && position < count, "chunk index out of range")
        guard position >= Self.pageSize else { return firstPage[position] }
        return laterPages[position >> Self.pageShift - 1][position & (Self.pageSize - 1)]
    }

    /// Changes the chunk at `position` in place, so that its items stay its own when nothing
    /// else shares them. (A `_modify` accessor would read better; yielded through two arrays it
    /// crashed debug builds of this toolchain.)
    mutating func update<Result>(_ position: Int, _ body: (inout ItemList.Chunk) -> Result) -> Result {
        precondition(position >= 0 && position < count, "chunk index out of range")
        guard position >= Self.pageSize else { return body(&firstPage[position]) }
        return body(&laterPages[position >> Self.pageShift - 1][position & (Self.pageSize - 1)])
    }

    mutating func append(_ chunk: ItemList.Chunk) {
        let count = self.count
        if count < Self.pageSize {
            // Not reserved: most collections hold one chunk, and a page grows as an array does.
            firstPage.append(chunk)
        } else if count & (Self.pageSize - 1) == 0 {
            laterPages.append([chunk])
        } else {
            laterPages[laterPages.count - 1].append(chunk)
        }
    }

    /// Replaces the chunks in `range` with `newChunks`; the chunks after it move.
    mutating func replaceSubrange(_ range: Range<Int>, with newChunks: [ItemList.Chunk]) {
        precondition(range.lowerBound >= 0 && range.upperBound <= count, "chunk range out of bounds")
        let after = Array(self[range.upperBound...])
        truncate(to: range.lowerBound)
        for chunk in newChunks { append(chunk) }
        for chunk in after { append(chunk) }
    }

    mutating func remove(at position: Int) {
        replaceSubrange(position..<(position + 1), with: [])
    }

    mutating func removeAll(where shouldRemove: (ItemList.Chunk) -> Bool) {
        guard contains(where: shouldRemove) else { return }
        self = ChunkTable(filter { !shouldRemove($0) })
    }

    /// Keeps the first `newCount` chunks.
    private mutating func truncate(to newCount: Int) {
        guard newCount > Self.pageSize else {
            laterPages = []
            firstPage.removeSubrange(newCount...)
            return
        }
        // Pages kept in all, the first included; the last of them may be cut.
        let fullPages = newCount >> Self.pageShift
        let rest = newCount & (Self.pageSize - 1)
        laterPages.removeSubrange((rest > 0 ? fullPages : fullPages - 1)...)
        if rest > 0 { laterPages[fullPages - 1].removeSubrange(rest...) }
    }
}

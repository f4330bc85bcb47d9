/// The chunk table of an item list: its first chunk held in place, the others in pages of 64.
///
/// Each published version keeps a snapshot, so the table is shared when the next write changes
/// a chunk. A flat array would then be copied whole, a retain per chunk, and released whole when
/// the version is forgotten: work in proportion to the collection, for every version. Here a
/// change copies the one page it touches and the short table of pages. Inserting or removing a
/// chunk (a split, an emptied chunk) moves the chunks after it, as an array would.
struct ChunkTable: RandomAccessCollection, Sendable {
    private static let pageShift = 6
    private static let pageSize = 1 << pageShift

    /// Chunk 0, held in the table itself: most collections hold one chunk, which then needs
    /// no array, and an idle one-item collection no allocation for one.
    private var first: ItemList.Chunk?
    /// Chunks 1, 2, … in pages of 64, each full but the last.
    private var pages: [[ItemList.Chunk]] = []

    init() {}

    init(_ chunks: some Sequence<ItemList.Chunk>) {
        for chunk in chunks { append(chunk) }
    }

    @inline(__always) var count: Int {
        guard first != nil else { return 0 }
        guard let last = pages.last else { return 1 }
        return 1 + (pages.count - 1) << Self.pageShift + last.count
    }

    var startIndex: Int { 0 }
    var endIndex: Int { count }

    @inline(__always) subscript(position: Int) -> ItemList.Chunk {
        precondition(position >= 0 && position < count, "chunk index out of range")
        guard position > 0 else {
            guard let first else { preconditionFailure("chunk index out of range") }
            return first
        }
        let later = position - 1
        return pages[later >> Self.pageShift][later & (Self.pageSize - 1)]
    }

    /// Changes the chunk at `position` in place, so that its items stay its own when nothing
    /// else shares them. (A `_modify` accessor would read better; yielded through two arrays it
    /// crashed debug builds of this toolchain.)
    mutating func update<Result>(_ position: Int, _ body: (inout ItemList.Chunk) -> Result) -> Result {
        precondition(position >= 0 && position < count, "chunk index out of range")
        guard position > 0 else {
            // Taken out and put back, not copied: the chunk's items stay uniquely referenced.
            guard var chunk = first.take() else { preconditionFailure("chunk index out of range") }
            defer { first = chunk }
            return body(&chunk)
        }
        let later = position - 1
        return body(&pages[later >> Self.pageShift][later & (Self.pageSize - 1)])
    }

    /// How many chunks after chunk 0 both tables hold in the very same pages, counted a page
    /// at a time from the first, without reading a chunk: copies of one table share every page
    /// neither changed, so a feed's next version shares all but its last page with the one
    /// before, and comparing them chunk by chunk would walk the whole collection per version.
    func chunksInSharedLeadingPages(with other: ChunkTable) -> Int {
        var shared = 0
        for (page, otherPage) in zip(pages, other.pages) {
            let same = page.withUnsafeBufferPointer { mine in
                otherPage.withUnsafeBufferPointer { theirs in
                    mine.baseAddress == theirs.baseAddress && mine.count == theirs.count
                }
            }
            guard same else { break }
            shared += page.count
        }
        return shared
    }

    mutating func append(_ chunk: ItemList.Chunk) {
        let later = count - 1
        if later < 0 {
            first = chunk
        } else if later & (Self.pageSize - 1) == 0 {
            // Not reserved: a page grows as an array does.
            pages.append([chunk])
        } else {
            pages[pages.count - 1].append(chunk)
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
        guard newCount > 0 else {
            first = nil
            pages = []
            return
        }
        // Pages of later chunks kept whole, and the chunks kept of the one after them.
        let later = newCount - 1
        let fullPages = later >> Self.pageShift
        let rest = later & (Self.pageSize - 1)
        pages.removeSubrange((rest > 0 ? fullPages + 1 : fullPages)...)
        if rest > 0 { pages[fullPages].removeSubrange(rest...) }
    }
}

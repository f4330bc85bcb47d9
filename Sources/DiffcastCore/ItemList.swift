import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The items of a section, kept in chunks of at most `chunkCapacity`, so that a write copies
/// and shifts one chunk rather than the whole section, copies of a snapshot share every chunk
/// they did not change, and the differ can skip chunks that are the same in two versions.
///
/// Every chunk has an identifier for its lifetime and a revision that changes with any change
/// of its items: equal (identifier, revision) means equal items.
public struct ItemList: RandomAccessCollection, Sendable {
    public typealias ChunkID = UInt64

    public static let chunkCapacity = 512
    /// How full chunks are when a list is built from scratch: room to grow before splitting.
    private static let initialFill = 384

    /// A run of items with its identity, its revision and the digest of its items' tokens.
    ///
    /// The digest is refreshed lazily: a change of the items only marks it stale, and
    /// `refreshDigest()` (once per published version, through `Snapshot.refreshDigests()`)
    /// folds the chunk again, so a batch of a thousand writes to one chunk folds it once. After
    /// appends only, it folds just the new items onto the digest of the ones before.
    struct Chunk: Sendable {
        let id: ChunkID
        private(set) var revision: UInt64
        /// The digest of the first `digestedCount` items, which no change since touched (its
        /// token count is `digestedCount`: one token per item).
        private var cachedDigest: UInt64
        private(set) var items: ItemBuffer
        /// 32-bit and after `items`, whose own count is 32-bit: the chunk takes 40 bytes, so
        /// that a list keeps its first chunk within `ChunkTable` at no cost to a larger one.
        private var digestedCount: Int32

        init(id: ChunkID = ItemList.nextStamp(), items: some Collection<Item>) {
            self.id = id
            self.items = ItemBuffer(items)
            self.revision = ItemList.nextStamp()
            self.cachedDigest = DigestPart.empty.value
            self.digestedCount = 0
            refreshDigest()
        }

        /// Appends items; the digest of the ones before stays.
        mutating func append(contentsOf newItems: some Collection<Item>) {
            items.append(contentsOf: newItems)
            revision = ItemList.nextStamp()
        }

        /// Any other change of the items: the digest is folded again from the first item.
        mutating func changeItems<Result>(_ body: (inout ItemBuffer) -> Result) -> Result {
            defer {
                revision = ItemList.nextStamp()
                cachedDigest = DigestPart.empty.value
                digestedCount = 0
            }
            return body(&items)
        }

        /// The digest part of the items: the cached one, with the items after it folded on.
        var digest: DigestPart {
            var part = DigestPart(value: cachedDigest, tokens: Int(digestedCount))
            for index in Int(digestedCount)..<items.count { part.append(tokenHash: items[index].tokenHash) }
            return part
        }

        var hasStaleDigest: Bool { Int(digestedCount) != items.count }

        mutating func refreshDigest() {
            guard hasStaleDigest else { return }
            cachedDigest = digest.value
            digestedCount = Int32(truncatingIfNeeded: items.count)
        }
    }

    private static let stamps = Atomic<UInt64>(0)

    /// A fresh identifier or revision, never handed out before in this process.
    static func nextStamp() -> UInt64 {
        stamps.add(1, ordering: .relaxed).newValue
    }

    /// The digest part of all the items in order: after `refreshDigests()`, a lookup; else the
    /// current prefix and the chunks after it combined, never a step per item.
    public var digest: DigestPart {
        let first = Swift.min(currentPrefixes, chunks.count, digestPrefixes.count)
        var part = first > 0 ? digestPrefixes[first - 1] : .empty
        for index in first..<chunks.count { part.append(chunks[index].digest) }
        return part
    }

    /// Folds the chunks from the first one changed since the last refresh: a write at the end
    /// of a long list (a growing feed) folds one chunk, not the whole table.
    public mutating func refreshDigests() {
        guard hasStaleDigests else { return }
        if chunks.count <= 1 {
            // One chunk is its own prefix: most collections are small, and keep no table.
            if chunks.count == 1 { chunks.update(0) { $0.refreshDigest() } }
            digestPrefixes = []
            currentPrefixes = chunks.count
            return
        }
        let first = Swift.min(currentPrefixes, chunks.count, digestPrefixes.count)
        digestPrefixes.removeSubrange(first...)
        var part = first > 0 ? digestPrefixes[first - 1] : .empty
        for index in first..<chunks.count {
            chunks.update(index) { $0.refreshDigest() }
            part.append(chunks[index].digest)
            digestPrefixes.append(part)
        }
        currentPrefixes = chunks.count
    }

    /// Whether a chunk changed since the last refresh.
    public var hasStaleDigests: Bool {
        currentPrefixes != chunks.count || digestPrefixes.count != (chunks.count > 1 ? chunks.count : 0)
    }

    /// `digestPrefixes[i]` is the digest part of chunks 0...i. The first `currentPrefixes`
    /// entries are current, and so are those chunks' own digests: a change to a chunk cuts the
    /// count back to it (`changedChunk`), and `refreshDigests()` folds again from there.
    private var digestPrefixes: [DigestPart] = []
    private var currentPrefixes = 0

    /// Notes that the chunk at `index` (or one inserted or removed there) changed.
    private mutating func changedChunk(_ index: Int) {
        currentPrefixes = Swift.min(currentPrefixes, index)
    }

    private(set) var chunks = ChunkTable()
    /// The position of the first item of each chunk.
    private(set) var starts = ChunkStarts()
    public private(set) var count = 0

    public init() {}

    /// The items in chunks of `initialFill`, each allocated at its own size (a reservation
    /// per chunk that small lists never fill would leave a page behind each of them).
    public init(_ items: some Sequence<Item>) {
        let all = Array(items)
        var start = 0
        while start < all.count {
            let end = Swift.min(all.count, start + Self.initialFill)
            appendChunk(all[start..<end])
            start = end
        }
    }

    /// Takes the items straight into the chunk's buffer: an intermediate array would retain and
    /// release every item's id and data once more.
    private mutating func appendChunk(_ items: some Collection<Item>) {
        changedChunk(chunks.count)
        starts.append(count)
        chunks.append(Chunk(items: items))
        count += items.count
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { count }

    public subscript(position: Int) -> Item {
        let (chunk, offset) = locate(position)
        return chunks[chunk].items[offset]
    }

    /// The chunk holding `position` (0..<count) and the offset in it.
    func locate(_ position: Int) -> (chunk: Int, offset: Int) {
        var low = 0
        var high = chunks.count - 1
        while low < high {
            let middle = (low + high + 1) / 2
            if starts[middle] <= position { low = middle } else { high = middle - 1 }
        }
        return (low, position - starts[low])
    }

    /// All items in one array, copied chunk by chunk (faster than walking item by item).
    public var flattened: [Item] {
        var items: [Item] = []
        items.reserveCapacity(count)
        for chunk in chunks { items.append(contentsOf: chunk.items) }
        return items
    }

    public func makeIterator() -> Iterator {
        Iterator(chunks: chunks)
    }

    /// Walks the chunks in order without locating each position.
    public struct Iterator: IteratorProtocol {
        private let chunks: ChunkTable
        private var chunk = 0
        private var offset = 0

        init(chunks: ChunkTable) {
            self.chunks = chunks
        }

        public mutating func next() -> Item? {
            while chunk < chunks.count {
                if offset < chunks[chunk].items.count {
                    defer { offset += 1 }
                    return chunks[chunk].items[offset]
                }
                chunk += 1
                offset = 0
            }
            return nil
        }
    }

    // MARK: - Finding items

    /// The index of the chunk with this identifier: a scan of the chunk table, not of the items.
    func chunkIndex(of id: ChunkID) -> Int? {
        chunks.firstIndex { $0.id == id }
    }

    /// The position of an item known to be in the chunk `chunkID`.
    func position(of itemID: Identifier, inChunk chunkID: ChunkID) -> Int? {
        guard let chunk = chunkIndex(of: chunkID),
            let offset = chunks[chunk].items.firstIndex(where: { $0.id == itemID })
        else { return nil }
        return starts[chunk] + offset
    }

    /// Calls `body` with every item's identifier hash (`Identifier.hashBits`), the chunk it is
    /// in, and a function that reads its identifier; and `ahead` with the hash of the item
    /// `aheadDistance` places later in the same chunk (at a chunk's start, with those of its
    /// first `aheadDistance` items), for a caller that prefetches what it will look up.
    ///
    /// The items are read in place: a caller that needs an identifier only now and then (an
    /// id shared by two items) copies no other, where a copy retains and releases the
    /// identifier's text, most of a long walk's time.
    func forEachHashPlacement(
        aheadDistance: Int, ahead: (_ hashBits: UInt64) -> Void,
        _ body: (_ hashBits: UInt64, ChunkID, _ identifier: () -> Identifier) -> Void
    ) {
        for chunk in chunks {
            chunk.items.withUnsafeBufferPointer { items in
                for index in items.indices.prefix(aheadDistance) { ahead(items[index].id.hashBits) }
                for index in items.indices {
                    if index + aheadDistance < items.count { ahead(items[index + aheadDistance].id.hashBits) }
                    body(items[index].id.hashBits, chunk.id, { items[index].id })
                }
            }
        }
    }

    /// Calls `body` with every item's identifier and the chunk it is in.
    func forEachPlacement(_ body: (Identifier, ChunkID) -> Void) {
        for chunk in chunks {
            // Only the identifier is read: copying the whole item would retain its data too.
            chunk.items.withUnsafeBufferPointer { items in
                for index in items.indices { body(items[index].id, chunk.id) }
            }
        }
    }

    /// Calls `body` with the items at `range`, chunk by chunk, in place: each run with the
    /// position of its first item. A walk that reads many items copies none (a copy retains
    /// the item's texts, whose memory a long walk otherwise never touches).
    func forEachRun(in range: Range<Int>, _ body: (_ start: Int, _ items: UnsafeBufferPointer<Item>) -> Void) {
        guard !range.isEmpty else { return }
        var (chunk, offset) = locate(range.lowerBound)
        var position = range.lowerBound
        while position < range.upperBound {
            chunks[chunk].items.withUnsafeBufferPointer { items in
                let end = Swift.min(items.count, offset + range.upperBound - position)
                body(position, UnsafeBufferPointer(rebasing: items[offset..<end]))
                position += end - offset
            }
            chunk += 1
            offset = 0
        }
    }

    /// How many chunks at the start and at the end two lists share (the same identifier and
    /// revision, so the same items), found without reading an item; the two counts never
    /// overlap. The differ jumps over them: a write at one end of a long list costs the chunks
    /// it changed, not a walk of the chunk table.
    func sharedChunks(with other: ItemList) -> (leading: Int, trailing: Int) {
        let limit = Swift.min(chunks.count, other.chunks.count)
        func same(_ index: Int, _ otherIndex: Int) -> Bool {
            chunks[index].id == other.chunks[otherIndex].id
                && chunks[index].revision == other.chunks[otherIndex].revision
        }
        var leading = 0
        if limit > 0, same(0, 0) {
            // Pages the two tables share hold the same chunks: those are not read one by one.
            leading = Swift.min(limit, 1 + chunks.chunksInSharedLeadingPages(with: other.chunks))
        }
        while leading < limit, same(leading, leading) { leading += 1 }
        var trailing = 0
        while leading + trailing < limit, same(chunks.count - 1 - trailing, other.chunks.count - 1 - trailing) {
            trailing += 1
        }
        return (leading, trailing)
    }

    /// Calls `body` with the identifier of every chunk.
    func forEachChunk(_ body: (ChunkID) -> Void) {
        for chunk in chunks { body(chunk.id) }
    }

    // MARK: - Changing items

    mutating func setData(_ data: JSONText?, at position: Int) {
        let (chunk, offset) = locate(position)
        changedChunk(chunk)
        chunks.update(chunk) { $0.changeItems { $0[offset].data = data } }
    }

    /// Where `insert(contentsOf:at:)` put items: the chunk of every item whose chunk changed
    /// (the inserted ones, and those a split moved), in any order.
    enum Placements {
        /// Every inserted item went into one chunk and no other item moved: a feed's append,
        /// told without an array of its own.
        case together([Item], in: ChunkID)
        /// Each item whose chunk changed, with its chunk; more than the inserted items when a
        /// split moved others.
        case listed([(Identifier, ChunkID)])
    }

    /// Inserts `items` before `position` (0...count).
    mutating func insert(contentsOf items: [Item], at position: Int) -> Placements {
        guard !items.isEmpty else { return .listed([]) }
        guard !chunks.isEmpty else {
            self = ItemList(items)
            var placements: [(Identifier, ChunkID)] = []
            forEachPlacement { placements.append(($0, $1)) }
            return .listed(placements)
        }
        if position == count {
            return append(contentsOf: items)
        }
        let (chunk, offset) = locate(position)
        changedChunk(chunk)
        chunks.update(chunk) { $0.changeItems { $0.insert(contentsOf: items, at: offset) } }
        count += items.count
        let placements: Placements
        if chunks[chunk].items.count > Self.chunkCapacity {
            placements = .listed(split(chunk))
        } else {
            placements = .together(items, in: chunks[chunk].id)
        }
        recomputeStarts(from: chunk)
        return placements
    }

    /// Appends at the end: the last chunk is filled up, the rest goes into new full chunks. A
    /// growing feed thus keeps full chunks (half as many as splitting would leave) and moves no
    /// item to another chunk.
    private mutating func append(contentsOf items: [Item]) -> Placements {
        let last = chunks.count - 1
        let room = Swift.max(0, Self.chunkCapacity - chunks[last].items.count)
        let intoLast = Swift.min(room, items.count)
        if intoLast > 0 {
            changedChunk(last)
            chunks.update(last) { $0.append(contentsOf: items[..<intoLast]) }
            count += intoLast
            if intoLast == items.count { return .together(items, in: chunks[last].id) }
        }
        var placements: [(Identifier, ChunkID)] = []
        placements.reserveCapacity(items.count)
        for item in items[..<intoLast] { placements.append((item.id, chunks[last].id)) }
        var start = intoLast
        while start < items.count {
            let end = Swift.min(items.count, start + Self.chunkCapacity)
            appendChunk(items[start..<end])
            for item in items[start..<end] { placements.append((item.id, chunks[chunks.count - 1].id)) }
            start = end
        }
        return .listed(placements)
    }

    /// Splits an overfull chunk into half-full ones; the first keeps its identifier.
    private mutating func split(_ chunk: Int) -> [(Identifier, ChunkID)] {
        let all = chunks[chunk].items
        let half = Self.chunkCapacity / 2
        var pieces: [Chunk] = []
        var start = 0
        while start < all.count {
            let end = Swift.min(start + half, all.count)
            let id = pieces.isEmpty ? chunks[chunk].id : Self.nextStamp()
            pieces.append(Chunk(id: id, items: all[start..<end]))
            start = end
        }
        chunks.replaceSubrange(chunk..<(chunk + 1), with: pieces)
        starts.split(chunk, into: pieces.count)
        // Every item of the split chunk is reported (the inserted ones may be in any piece).
        var placements: [(Identifier, ChunkID)] = []
        for piece in pieces {
            for item in piece.items { placements.append((item.id, piece.id)) }
        }
        return placements
    }

    @discardableResult
    mutating func remove(at position: Int) -> Item {
        let (chunk, offset) = locate(position)
        changedChunk(chunk)
        let item = chunks.update(chunk) { $0.changeItems { $0.remove(at: offset) } }
        count -= 1
        if chunks[chunk].items.isEmpty {
            chunks.remove(at: chunk)
            starts.remove(at: chunk)
        }
        recomputeStarts(from: chunk)
        return item
    }

    mutating func removeAll(where shouldRemove: (Item) -> Bool) {
        for index in chunks.indices {
            guard chunks[index].items.contains(where: shouldRemove) else { continue }
            changedChunk(index)
            chunks.update(index) { $0.changeItems { $0.removeAll(where: shouldRemove) } }
        }
        chunks.removeAll { $0.items.isEmpty }
        starts = ChunkStarts(zeros: chunks.count)
        count = chunks.reduce(0) { $0 + $1.items.count }
        recomputeStarts(from: 0)
    }

    /// Renumbers the chunk starts from `chunk` on (`starts` already has one entry per chunk).
    private mutating func recomputeStarts(from chunk: Int) {
        let first = Swift.min(chunk, chunks.count)
        var position = first > 0 ? starts[first - 1] + chunks[first - 1].items.count : 0
        for index in first..<chunks.count {
            starts[index] = position
            position += chunks[index].items.count
        }
    }
}

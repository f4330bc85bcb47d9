#if canImport(Glibc)
    import Glibc
#endif

/// The items of one chunk: a copy-on-write array whose storage the versions of a growing chunk
/// share. Every published version keeps a snapshot, so with a plain `Array` the next append to
/// the last chunk of a feed would copy all of that chunk's items (and release them again when
/// the version is forgotten): work in proportion to the chunk, for every version. Here a value
/// that holds the whole filled part of its storage appends in place, past the end, where no
/// other value looks; the other values keep their shorter count. Every other change copies
/// first unless the storage is the value's alone, as `Array` does.
///
/// It is `@unchecked Sendable` for the reason given at `Storage`: values of one chunk are
/// changed only on the apply queue, and a value reads only the items below its `count`, which
/// no value writes again while it is shared.
struct ItemBuffer: RandomAccessCollection, @unchecked Sendable {
    /// How many items `storage` has initialized, and room for how many; only the value that
    /// holds all of them may append. 32-bit: a buffer holds one chunk (at most
    /// `ItemList.chunkCapacity` items), and an idle one-item collection's buffer fits 80 bytes
    /// of heap instead of 96.
    struct Header {
        private var storedFilled: Int32
        private let storedCapacity: Int32

        init(filled: Int, capacity: Int) {
            precondition(capacity <= Int32.max, "an item buffer holds one chunk")
            storedFilled = Int32(truncatingIfNeeded: filled)
            storedCapacity = Int32(truncatingIfNeeded: capacity)
        }

        var filled: Int {
            get { Int(storedFilled) }
            set { storedFilled = Int32(truncatingIfNeeded: newValue) }
        }
        var capacity: Int { Int(storedCapacity) }
    }

    /// Shared only by values of one chunk on the apply queue, which changes documents one
    /// batch at a time. A value never reads past its `count`, and only the value whose count is
    /// `filled` writes, past it; so readers on other threads (a snapshot being encoded or
    /// checkpointed) never touch what is written.
    final class Storage: ManagedBuffer<Header, Item> {
        deinit {
            _ = withUnsafeMutablePointers { header, items in items.deinitialize(count: header.pointee.filled) }
        }

        static func make(capacity: Int) -> Storage {
            let buffer = Storage.create(minimumCapacity: capacity) { _ in Header(filled: 0, capacity: capacity) }
            // `create` returns the dynamic type it was called on.
            return unsafeDowncast(buffer, to: Storage.self)
        }
    }

    private var storage: Storage
    /// 32-bit, like the header, so that a chunk's buffer and the 32-bit count after it in
    /// `ItemList.Chunk` share one 8-byte word.
    private var storedCount: Int32
    var count: Int { Int(storedCount) }

    init(_ items: some Collection<Item>) {
        storage = Storage.make(capacity: items.count)
        storedCount = 0
        append(contentsOf: items)
    }

    var startIndex: Int { 0 }
    var endIndex: Int { count }

    subscript(position: Int) -> Item {
        get {
            precondition(position >= 0 && position < count, "item index out of range")
            return storage.withUnsafeMutablePointerToElements { $0[position] }
        }
        set {
            precondition(position >= 0 && position < count, "item index out of range")
            makeUnique(minimumCapacity: count)
            storage.withUnsafeMutablePointerToElements { $0[position] = newValue }
        }
    }

    func withContiguousStorageIfAvailable<Result>(
        _ body: (UnsafeBufferPointer<Item>) throws -> Result
    ) rethrows -> Result? {
        try withUnsafeBufferPointer(body)
    }

    func withUnsafeBufferPointer<Result>(_ body: (UnsafeBufferPointer<Item>) throws -> Result) rethrows -> Result {
        try storage.withUnsafeMutablePointerToElements { try body(UnsafeBufferPointer(start: $0, count: count)) }
    }

    /// What every value keeps true between calls: it reads only items its storage has
    /// initialized, and the storage never holds more than its room. Checked after every change
    /// in debug builds (`DIFFCAST_INTERNAL_CHECKS`).
    private func checkInvariants() {
        #if DIFFCAST_INTERNAL_CHECKS
            let header = self.header
            precondition(count >= 0 && count <= header.filled, "an item buffer reads past what is initialized")
            precondition(header.filled <= header.capacity, "an item buffer holds more than its room")
        #endif
    }

    /// The storage's header, read through its pointer: `ManagedBuffer.header` is a class
    /// property, and every read of it pays a dynamic exclusivity check.
    private var header: Header { storage.withUnsafeMutablePointerToHeader { $0.pointee } }

    /// Makes `storage` this value's alone, holding exactly its items, with room for
    /// `minimumCapacity`.
    private mutating func makeUnique(minimumCapacity: Int) {
        let header = self.header
        if isKnownUniquelyReferenced(&storage), header.capacity >= minimumCapacity {
            // Items past `count` were appended by a longer value that is gone (a version that was
            // rolled back): nobody can see them.
            if header.filled > count {
                storage.withUnsafeMutablePointers { header, items in
                    (items + count).deinitialize(count: header.pointee.filled - count)
                    header.pointee.filled = count
                }
            }
            return
        }
        let copy = Storage.make(capacity: Swift.max(minimumCapacity, count))
        copy.withUnsafeMutablePointers { header, items in
            storage.withUnsafeMutablePointerToElements { items.initialize(from: $0, count: count) }
            header.pointee.filled = count
        }
        storage = copy
    }

    /// Appends in place when this value holds all of its storage's items and there is room, even
    /// if other (shorter) values share it; else copies first, leaving room to grow.
    mutating func append(contentsOf newItems: some Collection<Item>) {
        let added = newItems.count
        guard added > 0 else { return }
        let header = self.header
        if header.filled != count || header.capacity < count + added {
            makeUnique(minimumCapacity: Swift.max(count + added, Swift.min(2 * count, ItemList.chunkCapacity)))
        }
        storage.withUnsafeMutablePointers { header, items in
            _ = UnsafeMutableBufferPointer(start: items + count, count: added).initialize(fromContentsOf: newItems)
            header.pointee.filled = count + added
        }
        storedCount += Int32(truncatingIfNeeded: added)
        checkInvariants()
    }

    mutating func insert(contentsOf newItems: some Collection<Item>, at position: Int) {
        precondition(position >= 0 && position <= count, "item index out of range")
        let added = newItems.count
        guard added > 0 else { return }
        makeUnique(minimumCapacity: count + added)
        storage.withUnsafeMutablePointers { header, items in
            (items + position + added).moveInitialize(from: items + position, count: count - position)
            _ = UnsafeMutableBufferPointer(start: items + position, count: added).initialize(fromContentsOf: newItems)
            header.pointee.filled = count + added
        }
        storedCount += Int32(truncatingIfNeeded: added)
        checkInvariants()
    }

    @discardableResult
    mutating func remove(at position: Int) -> Item {
        precondition(position >= 0 && position < count, "item index out of range")
        makeUnique(minimumCapacity: count)
        let removed = storage.withUnsafeMutablePointers { header, items in
            let removed = (items + position).move()
            (items + position).moveInitialize(from: items + position + 1, count: count - position - 1)
            header.pointee.filled = count - 1
            return removed
        }
        storedCount -= 1
        checkInvariants()
        return removed
    }

    mutating func removeAll(where shouldRemove: (Item) -> Bool) {
        let kept = filter { !shouldRemove($0) }
        guard kept.count < count else { return }
        self = ItemBuffer(kept)
    }
}

/// Reading items in place, without a copy of each (a copy retains an item's identifier and
/// data). The pointers into an item buffer's storage are made here and nowhere else in the
/// module: what keeps them valid is a property of the storage (`ManagedBuffer` elements never
/// move; the items below a value's count are never written while the storage is shared).
extension ItemBuffer {
    /// A buffer's items as the diff reads them, held past one closure: a full diff keeps the
    /// places of a million old items in a table and reads them as lookups land. Valid while a
    /// value of the buffer it came from lives; the diff borrows the old snapshot for as long
    /// as it uses its pinned chunks.
    struct Pinned {
        private let base: UnsafePointer<Item>
        let count: Int

        fileprivate init(base: UnsafePointer<Item>, count: Int) {
            self.base = base
            self.count = count
        }

        /// The items in `offsets`, as a buffer the caller walks.
        func items(_ offsets: Range<Int>) -> UnsafeBufferPointer<Item> {
            #if DIFFCAST_INTERNAL_CHECKS
                precondition(offsets.lowerBound >= 0 && offsets.upperBound <= count, "pinned items out of range")
            #endif
            return UnsafeBufferPointer(start: base + offsets.lowerBound, count: offsets.count)
        }

        /// Whether the item at `offset` has the identifier `id`.
        func identifier(at offset: Int, equals id: Identifier) -> Bool {
            item(offset).pointee.id == id
        }

        /// Whether the item at `offset` holds the data of `other`.
        func hasSameData(at offset: Int, as other: Item) -> Bool {
            item(offset).pointee.hasSameData(as: other)
        }

        private func item(_ offset: Int) -> UnsafePointer<Item> {
            #if DIFFCAST_INTERNAL_CHECKS
                precondition(offset >= 0 && offset < count, "pinned item out of range")
            #endif
            return base + offset
        }
    }

    /// The items pinned for a diff.
    var pinned: Pinned {
        storage.withUnsafeMutablePointerToElements { Pinned(base: UnsafePointer($0), count: count) }
    }

    /// How many items from `offset` on are the same bit for bit as those of `other` from
    /// `otherOffset` on (the same stored identifier and data, so equal), up to the end of
    /// either. A chunk copied when a write changed it shares its other items with the old one,
    /// and this finds them with memcmp instead of comparing identifiers and data one by one.
    func identicalItems(from offset: Int, as other: ItemBuffer, from otherOffset: Int) -> Int {
        let limit = Swift.min(count - offset, other.count - otherOffset)
        guard limit > 0 else { return 0 }
        return storage.withUnsafeMutablePointerToElements { mine in
            other.storage.withUnsafeMutablePointerToElements { theirs in
                let stride = MemoryLayout<Item>.stride
                let myStart = UnsafeRawPointer(mine + offset)
                let theirStart = UnsafeRawPointer(theirs + otherOffset)
                // Most often the whole rest is shared (items appended to the chunk): the same
                // storage, or else one memcmp. Padding bytes could differ between equal items;
                // then the walk below decides.
                if myStart == theirStart || memcmp(myStart, theirStart, limit * stride) == 0 {
                    return limit
                }
                var run = 0
                while run < limit,
                    memcmp(myStart + run * stride, theirStart + run * stride, MemoryLayout<Item>.size) == 0
                {
                    run += 1
                }
                return run
            }
        }
    }
}

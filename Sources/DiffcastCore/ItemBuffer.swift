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

    /// The hash of the identifier at `position`, read in place without copying the item.
    func hashBits(at position: Int) -> UInt64 {
        precondition(position >= 0 && position < count, "item index out of range")
        return storage.withUnsafeMutablePointerToElements { $0[position].id.hashBits }
    }

    func withContiguousStorageIfAvailable<Result>(
        _ body: (UnsafeBufferPointer<Item>) throws -> Result
    ) rethrows -> Result? {
        try withUnsafeBufferPointer(body)
    }

    func withUnsafeBufferPointer<Result>(_ body: (UnsafeBufferPointer<Item>) throws -> Result) rethrows -> Result {
        try storage.withUnsafeMutablePointerToElements { try body(UnsafeBufferPointer(start: $0, count: count)) }
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
        return removed
    }

    mutating func removeAll(where shouldRemove: (Item) -> Bool) {
        let kept = filter { !shouldRemove($0) }
        guard kept.count < count else { return }
        self = ItemBuffer(kept)
    }
}

/// Cursors that walk two versions of a list side by side, forwards and backwards, and tell
/// when they stand at the start of a chunk both versions still share, so the differ can skip it.
extension ItemList {
    /// A position in a list that can also tell when it stands at the start of a chunk, so two
    /// versions walked side by side can skip a chunk both still share.
    struct Cursor {
        let list: ItemList
        private(set) var chunk = 0
        private(set) var offset = 0
        private(set) var position = 0

        init(_ list: ItemList) {
            self.list = list
        }

        /// A cursor standing at the first item of chunk `chunk` (0...chunk count).
        init(_ list: ItemList, atChunk chunk: Int) {
            self.list = list
            self.chunk = chunk
            self.position = chunk < list.chunks.count ? list.starts[chunk] : list.count
        }

        /// A cursor standing at `position` (0...count).
        init(_ list: ItemList, at position: Int) {
            self.list = list
            guard position < list.count else {
                (self.chunk, self.position) = (list.chunks.count, list.count)
                return
            }
            (self.chunk, self.offset) = list.locate(position)
            self.position = position
        }

        var atEnd: Bool { position >= list.count }
        var item: Item { list.chunks[chunk].items[offset] }
        /// The item's identifier and data, read without copying the whole item.
        var id: Identifier { list.chunks[chunk].items[offset].id }
        var data: JSONText? { list.chunks[chunk].items[offset].data }
        var atChunkStart: Bool { offset == 0 && !atEnd }
        var currentChunk: Chunk { list.chunks[chunk] }

        mutating func advance() {
            position += 1
            offset += 1
            if offset >= list.chunks[chunk].items.count {
                chunk += 1
                offset = 0
            }
        }

        /// Moves `count` items on, all in the current chunk.
        mutating func advance(by count: Int) {
            position += count
            offset += count
            if offset >= list.chunks[chunk].items.count {
                chunk += 1
                offset = 0
            }
        }

        /// How many items from each cursor on, within both their chunks, are the same bit for
        /// bit (`ItemBuffer.identicalItems`). Zero at the end of a list.
        static func identicalRun(_ old: Cursor, _ new: Cursor) -> Int {
            guard !old.atEnd, !new.atEnd else { return 0 }
            return old.list.chunks[old.chunk].items.identicalItems(
                from: old.offset, as: new.list.chunks[new.chunk].items, from: new.offset)
        }

        mutating func skipChunk() {
            position += list.chunks[chunk].items.count - offset
            chunk += 1
            offset = 0
        }
    }

    /// A position walked from the last item towards the first.
    struct BackwardCursor {
        let list: ItemList
        private var chunk: Int
        private var offset: Int

        /// A cursor at the last item (the list must not be empty to read `item`).
        init(_ list: ItemList) {
            self.list = list
            chunk = list.chunks.count - 1
            offset = chunk >= 0 ? list.chunks[chunk].items.count - 1 : -1
        }

        var item: Item { list.chunks[chunk].items[offset] }
        var id: Identifier { list.chunks[chunk].items[offset].id }
        var data: JSONText? { list.chunks[chunk].items[offset].data }

        mutating func retreat() {
            offset -= 1
            if offset < 0, chunk > 0 {
                chunk -= 1
                offset = list.chunks[chunk].items.count - 1
            }
        }
    }
}

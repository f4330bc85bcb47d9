import Testing

@testable import DiffcastCore

/// The sizes an idle collection's memory rests on (`DiffcastBenchmarks memory`): each is a
/// promise a doc comment makes, and a field added without thought breaks it here first.
@Suite struct LayoutTests {
    @Test func aChunkSharesItsLastWordAndFitsTheTableInPlace() {
        #expect(MemoryLayout<ItemBuffer.Header>.size == 8)
        #expect(MemoryLayout<ItemBuffer>.size == 12)
        #expect(MemoryLayout<ItemList.Chunk>.size == 40)
        #expect(MemoryLayout<ItemList.Chunk?>.size == 40)
        #expect(MemoryLayout<ChunkTable>.size == 48)
    }

    @Test func aSectionOfOneChunkFitsOneAllocationOf176Bytes() {
        // An array of one section: 32 bytes of header and the section, in a malloc chunk of 176.
        #expect(MemoryLayout<ItemList>.size == 80)
        #expect(MemoryLayout<Section>.stride == 136)
    }
}

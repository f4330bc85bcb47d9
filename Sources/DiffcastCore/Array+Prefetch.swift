import CPrefetch

extension Array {
    /// Starts loading the cache line of the element at `index` (0..<count), for a read soon
    /// after. Only a hint: nothing is read and nothing can fault. The hash tables of a full diff
    /// and of a large `apply` call it a few lookups ahead, so their cache misses overlap.
    func prefetch(_ index: Int) {
        withUnsafeBufferPointer { buffer in
            if let base = buffer.baseAddress { dc_prefetch(base + index) }
        }
    }
}

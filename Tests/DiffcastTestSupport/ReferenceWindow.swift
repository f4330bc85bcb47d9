// SPEC.md "Windows" over plain states, written from the spec (a port of model.py's
// window_range, window_view and reanchor), apart from DiffcastCore's WindowTracker it checks.

/// A window as the reference reads it.
public enum ReferenceWindowKind: Equatable {
    case first(Int)
    case last(Int)
    case anchor(before: Int, after: Int)
}

public enum ReferenceWindow {
    /// The items in order across sections.
    public static func itemIDs(_ state: PlainState) -> [[UInt8]] {
        state.flatMap { $0.items.map(\.id) }
    }

    /// (lower, upper, total) of a window, the anchor (for anchor windows) being `anchor`.
    public static func range(_ kind: ReferenceWindowKind, _ state: PlainState, anchor: [UInt8]?) -> (Int, Int, Int) {
        let ids = itemIDs(state)
        let n = ids.count
        switch kind {
        case .first(let count): return (0, min(count, n), n)
        case .last(let count): return (max(0, n - count), n, n)
        case .anchor(let before, let after):
            guard let anchor, let p = ids.firstIndex(of: anchor) else { return (0, 0, n) }
            return (max(0, p - before), min(n, p + after + 1), n)
        }
    }

    /// Every section with an item in [lower, upper) and exactly those items, and every empty
    /// section whose place k has lower < k < upper, or k == lower == 0, or k == upper == total.
    public static func view(_ state: PlainState, _ lower: Int, _ upper: Int) -> PlainState {
        let n = state.reduce(0) { $0 + $1.items.count }
        var shown: PlainState = []
        var k = 0
        for section in state {
            if !section.items.isEmpty {
                let from = max(lower - k, 0)
                let to = min(max(upper - k, 0), section.items.count)
                if from < to {
                    shown.append(
                        PlainSection(id: section.id, data: section.data, items: Array(section.items[from..<to])))
                }
            } else if (lower < k && k < upper) || (k == lower && lower == 0) || (k == upper && upper == n) {
                shown.append(section)
            }
            k += section.items.count
        }
        return shown
    }

    /// The anchor at `state` given the anchor at the previous published version `previous`.
    public static func reanchor(_ anchor: [UInt8]?, from previous: PlainState, to state: PlainState) -> [UInt8]? {
        let alive = Set(itemIDs(state))
        if let anchor, alive.contains(anchor) { return anchor }
        let order = itemIDs(previous)
        if let anchor, let p = order.firstIndex(of: anchor) {
            if let next = order[(p + 1)...].first(where: alive.contains) { return next }
            if let before = order[..<p].last(where: alive.contains) { return before }
        }
        return itemIDs(state).first
    }
}

/// The ops of SPEC.md, looked up once per request (then every table is indexed by it).
enum Op: Int, CaseIterable {
    case ping, auth, list, stats, get, subscribe, unsubscribe, drop, window
    case apply, appendSections, insertSections, deleteSections, moveSection, reloadSections, updateSections
    case appendItems, insertItems, deleteItems, deleteAll, moveItem, reloadItems, reconfigureItems, updateItems
    case batch

    private static let names = [
        "ping", "auth", "list", "stats", "get", "subscribe", "unsubscribe", "drop", "window", "apply",
        "append_sections",
        "insert_sections", "delete_sections", "move_section", "reload_sections", "update_sections",
        "append_items", "insert_items", "delete_items", "delete_all", "move_item", "reload_items",
        "reconfigure_items", "update_items", "batch",
    ]
    private static let byName = Dictionary(uniqueKeysWithValues: zip(names, allCases))

    init?(name: String) {
        guard let op = Self.byName[name] else { return nil }
        self = op
    }

    var name: String { Self.names[rawValue] }

    /// The op a mistyped name most likely meant: the same letters in another case or without
    /// underscores (`APPLY`, `updateItems`), or at most two edits away (`updat_items`).
    static func closest(to typed: String) -> Op? {
        func normalized(_ text: String) -> [UInt8] {
            text.utf8.filter { $0 != UInt8(ascii: "_") && $0 != UInt8(ascii: "-") }.map { $0 | 0x20 }
        }
        let word = normalized(typed)
        guard !word.isEmpty, word.count <= 32 else { return nil }
        var best: (op: Op, distance: Int)?
        for op in allCases {
            let distance = editDistance(word, normalized(op.name))
            if distance <= 2, distance < best?.distance ?? .max { best = (op, distance) }
        }
        return best?.op
    }

    /// Levenshtein distance of two short words.
    private static func editDistance(_ a: [UInt8], _ b: [UInt8]) -> Int {
        var previous = Array(0...b.count)
        for (i, x) in a.enumerated() {
            var current = [i + 1]
            for (j, y) in b.enumerated() {
                current.append(Swift.min(previous[j + 1] + 1, current[j] + 1, previous[j] + (x == y ? 0 : 1)))
            }
            previous = current
        }
        return previous[b.count]
    }
    var isWrite: Bool { rawValue >= Op.apply.rawValue }

    /// Every key a request of this op may carry (SPEC.md: any other is named as an error).
    var requestKeys: [String] { Self.requestKeys[rawValue] }
    /// Every key this op may carry as an entry of a `batch` (which names the collection).
    var batchEntryKeys: [String] { Self.batchEntryKeys[rawValue] }

    private static let requestKeys = allCases.map { op in
        let namesCollection = op.isWrite || [.get, .unsubscribe, .drop, .subscribe, .window].contains(op)
        return op.argumentKeys + KeyCheck.everyRequest + (namesCollection ? ["collection"] : [])
    }
    private static let batchEntryKeys = allCases.map { $0.argumentKeys + KeyCheck.everyRequest }

    /// The keys the op takes besides `op`, `id` and `collection`.
    private var argumentKeys: [String] { Self.argumentKeys[rawValue] }

    private static let argumentKeys: [[String]] = allCases.map { op in
        switch op {
        case .ping, .list, .stats, .unsubscribe, .drop, .deleteAll: []
        case .auth: ["token"]
        case .get, .window: ["window"]
        case .subscribe: ["since", "epoch", "window"]
        case .apply, .appendSections, .deleteSections, .reloadSections, .updateSections: ["sections"]
        case .insertSections: ["sections", "before", "after"]
        case .moveSection: ["section", "before", "after"]
        case .appendItems: ["items", "section"]
        case .insertItems: ["items", "before", "after"]
        case .deleteItems, .reloadItems, .reconfigureItems, .updateItems: ["items"]
        case .moveItem: ["item", "before", "after"]
        case .batch: ["ops"]
        }
    }
}

/// The ops of SPEC.md, looked up once per request (then every table is indexed by it).
enum Op: Int, CaseIterable {
    case ping, auth, list, stats, get, subscribe, unsubscribe, drop
    case apply, appendSections, insertSections, deleteSections, moveSection, reloadSections, updateSections
    case appendItems, insertItems, deleteItems, deleteAll, moveItem, reloadItems, reconfigureItems, updateItems
    case batch

    private static let names = [
        "ping", "auth", "list", "stats", "get", "subscribe", "unsubscribe", "drop", "apply", "append_sections",
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
    var isWrite: Bool { rawValue >= Op.apply.rawValue }

    /// Every key a request of this op may carry (SPEC.md: any other is named as an error).
    var requestKeys: [String] { Self.requestKeys[rawValue] }
    /// Every key this op may carry as an entry of a `batch` (which names the collection).
    var batchEntryKeys: [String] { Self.batchEntryKeys[rawValue] }

    private static let requestKeys = allCases.map { op in
        let namesCollection = op.isWrite || [.get, .unsubscribe, .drop, .subscribe].contains(op)
        return op.argumentKeys + KeyCheck.everyRequest + (namesCollection ? ["collection"] : [])
    }
    private static let batchEntryKeys = allCases.map { $0.argumentKeys + KeyCheck.everyRequest }

    /// The keys the op takes besides `op`, `id` and `collection`.
    private var argumentKeys: [String] { Self.argumentKeys[rawValue] }

    private static let argumentKeys: [[String]] = allCases.map { op in
        switch op {
        case .ping, .list, .stats, .get, .unsubscribe, .drop, .deleteAll: []
        case .auth: ["token"]
        case .subscribe: ["since", "epoch"]
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

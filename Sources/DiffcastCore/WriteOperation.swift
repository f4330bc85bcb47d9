/// Where a section or item goes relative to an existing one (`before`/`after` of SPEC.md).
public enum Anchor: Hashable, Sendable {
    case before(Identifier)
    case after(Identifier)

    public var identifier: Identifier {
        switch self {
        case .before(let id), .after(let id): id
        }
    }
}

/// A section as a write supplies it: identifier, data and items, not yet checked for
/// uniqueness against the collection.
public typealias SectionInput = SectionOutline

/// New data for an existing section or item (`update_sections`, `update_items`).
public struct DataUpdate: Hashable, Sendable {
    public var id: Identifier
    public var data: JSONText?

    public init(id: Identifier, data: JSONText?) {
        self.id = id
        self.data = data
    }
}

/// One write of SPEC.md, already parsed and typed. Names mirror
/// `NSDiffableDataSourceSnapshot`; where Apple's API traps, `Document.apply` throws.
///
/// Not `indirect`: `batch` nests through an array, which is a reference already, and an
/// indirect enum would box every request's operation (one allocation per write).
public enum WriteOperation: Hashable, Sendable {
    case apply(sections: [SectionInput])
    case appendSections([SectionInput])
    case insertSections([SectionInput], anchor: Anchor)
    case deleteSections([Identifier])
    case moveSection(Identifier, anchor: Anchor)
    case reloadSections([Identifier])
    case updateSections([DataUpdate])
    case appendItems([Item], section: Identifier?)
    case insertItems([Item], anchor: Anchor)
    case deleteItems([Identifier])
    case deleteAll
    case moveItem(Identifier, anchor: Anchor)
    case reloadItems([Identifier])
    case reconfigureItems([Identifier])
    case updateItems([DataUpdate])
    case batch([WriteOperation])

    /// The op name of SPEC.md.
    public var name: String {
        switch self {
        case .apply: "apply"
        case .appendSections: "append_sections"
        case .insertSections: "insert_sections"
        case .deleteSections: "delete_sections"
        case .moveSection: "move_section"
        case .reloadSections: "reload_sections"
        case .updateSections: "update_sections"
        case .appendItems: "append_items"
        case .insertItems: "insert_items"
        case .deleteItems: "delete_items"
        case .deleteAll: "delete_all"
        case .moveItem: "move_item"
        case .reloadItems: "reload_items"
        case .reconfigureItems: "reconfigure_items"
        case .updateItems: "update_items"
        case .batch: "batch"
        }
    }
}

import DiffcastCore
import DiffcastWire

/// Follows one collection's whole-subscription events with the tests' own oracles, not the
/// client's `CollectionMirror`: a snapshot's digest and every changeset's are checked against
/// `ReferenceDigest`, a changeset must start at the version held, is applied by
/// `StrictApplier` (lists in order, each entry's identifier where it says) and must move no
/// more than `MoveLaw` allows. Only reading the JSON into lists is the project's (`EventDecoder`,
/// itself checked against hand-written lines).
public struct StrictMirror {
    public private(set) var state: PlainState = []
    /// The version held; nil before the first snapshot and after `dropped`.
    public private(set) var version: UInt64?
    public private(set) var snapshotsApplied = 0
    public private(set) var changesetsApplied = 0

    public init() {}

    /// The state held, as the daemon's own values (to compare with a `get`'s sections).
    public var sections: [SectionOutline] { outline(state) }

    public mutating func feed(_ line: JSONValue) throws {
        switch try EventDecoder.event(line) {
        case .snapshot(let version, _, let sections, let window, let digest):
            guard window == nil else { throw OracleViolation("a windowed snapshot on a whole subscription") }
            let next = plain(sections)
            try Self.check(digest, of: next, at: version)
            state = next
            self.version = version
            snapshotsApplied += 1
        case .changeset(let from, let version, let changeset, let window, let digest):
            guard window == nil else { throw OracleViolation("a windowed changeset on a whole subscription") }
            guard let held = self.version else { throw OracleViolation("a changeset before any snapshot") }
            // The daemon's lines always say `from`; only a page's compact stream leaves it out.
            guard let from else { throw OracleViolation("a changeset without its from") }
            guard from == held, version > from else {
                throw OracleViolation("a changeset from \(from) to \(version), but version \(held) is held")
            }
            let next = try StrictApplier.apply(changeset, to: state)
            try checkMoves(changeset, from: state, to: next)
            try Self.check(digest, of: next, at: version)
            state = next
            self.version = version
            changesetsApplied += 1
        case .dropped:
            state = []
            version = nil
        }
    }

    private static func check(_ digest: String?, of state: PlainState, at version: UInt64) throws {
        let expected = ReferenceDigest.of(state)
        guard digest == expected else {
            throw OracleViolation("version \(version): digest \(digest ?? "none"), but the state's is \(expected)")
        }
    }
}

/// Sections as the daemon's values, as plain bytes.
public func plain(_ sections: [SectionOutline]) -> PlainState {
    sections.map { section in
        PlainSection(
            id: bytes(section.id), data: bytes(section.data),
            items: section.items.map { PlainItem(id: bytes($0.id), data: bytes($0.data)) })
    }
}

/// Plain bytes as the daemon's values.
public func outline(_ state: PlainState) -> [SectionOutline] {
    state.map { section in
        SectionOutline(
            id: Identifier(String(decoding: section.id, as: UTF8.self)),
            data: section.data.map { JSONText(canonical: String(decoding: $0, as: UTF8.self)) },
            items: section.items.map {
                Item(
                    id: Identifier(String(decoding: $0.id, as: UTF8.self)),
                    data: $0.data.map { JSONText(canonical: String(decoding: $0, as: UTF8.self)) })
            })
    }
}

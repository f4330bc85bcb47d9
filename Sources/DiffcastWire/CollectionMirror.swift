import DiffcastCore

/// A subscriber's copy of one collection, kept by applying the events it receives with SPEC.md's
/// normative algorithm and checking the digest of every version: the client side of the wire.
///
/// The copy is a chunked `Snapshot`, so a changeset costs what it lists and the digest is
/// recombined from cached chunk digests, never re-hashed item by item.
public struct CollectionMirror: Sendable {
    public private(set) var snapshot = Snapshot()
    public private(set) var version: UInt64?
    public private(set) var epoch: String?
    public private(set) var changesetsApplied = 0
    public private(set) var snapshotsApplied = 0
    /// For a windowed subscription, where the view it holds stands in the collection (from the
    /// last event's `window`); nil for a whole one.
    public private(set) var window: WindowPlace?

    public init() {}

    /// The copy as plain values (a walk of every item: for tests and printing, not per event).
    public var sections: [SectionOutline] { snapshot.outline }

    /// Why an event could not be applied; the mirror should subscribe again without `since`.
    public struct Divergence: Error, CustomStringConvertible {
        public let description: String
    }

    /// What one event did to the mirror.
    public enum Update: Sendable {
        /// The whole state was replaced.
        case snapshot
        /// The changeset, as received, took the mirror from one version to the next: a UI
        /// applies it as one batch update (deletions at old positions, the rest at new ones).
        case changeset(Changeset)
        /// The collection was dropped; the mirror is empty and holds no version.
        case dropped
    }

    /// Applies one event line (already parsed) and says what changed; throws when it does not
    /// fit, leaving the mirror as it was.
    @discardableResult
    public mutating func feed(_ event: JSONValue) throws(Divergence) -> Update {
        let update: Update
        let nextWindow = try Self.window(event["window"])
        var next: Snapshot
        let nextVersion: UInt64
        var nextEpoch = epoch
        switch event["event"] {
        case .string("snapshot"):
            let outline = try Self.outline(event["sections"])
            next = Snapshot(uncheckedSections: outline.map { Section(id: $0.id, data: $0.data, items: $0.items) })
            nextVersion = try Self.version(event["version"])
            nextEpoch = event["epoch"].flatMap { if case .string(let text) = $0 { text } else { nil } }
            update = .snapshot
        case .string("changeset"):
            guard let current = version else { throw Divergence(description: "a changeset before any snapshot") }
            let from = try Self.version(event["from"])
            guard from == current else {
                throw Divergence(description: "chain broken: changeset from \(from) but the mirror holds \(current)")
            }
            let changeset = try Self.changeset(event)
            nextVersion = try Self.version(event["version"])
            do {
                next = try changeset.apply(to: snapshot)
            } catch {
                throw Divergence(description: "changeset \(from)->\(nextVersion): \(error)")
            }
            update = .changeset(changeset)
        case .string("dropped"):
            snapshot = Snapshot()
            version = nil
            epoch = nil
            window = nil
            return .dropped
        default:
            throw Divergence(description: "not an event: \(event.canonicalText.prefix(120))")
        }
        next.refreshDigests()
        let computed = Digest(of: next)
        guard case .string(let digest) = event["digest"], digest == computed.description else {
            throw Divergence(
                description: "digest \(event["digest"]?.canonicalText ?? "none") but the mirror computes \(computed)")
        }
        snapshot = next
        version = nextVersion
        epoch = nextEpoch
        window = nextWindow
        if case .snapshot = update { snapshotsApplied += 1 } else { changesetsApplied += 1 }
        return update
    }

    /// An event's `window` object: offset, count and total, and for anchor windows the anchor.
    private static func window(_ value: JSONValue?) throws(Divergence) -> WindowPlace? {
        guard let value else { return nil }
        func count(_ key: String) throws(Divergence) -> Int {
            guard case .number(let text) = value[key], let number = Int(text), number >= 0 else {
                throw Divergence(description: "bad window \(key) \(value[key]?.canonicalText ?? "none")")
            }
            return number
        }
        let (offset, shown, total) = (try count("offset"), try count("count"), try count("total"))
        guard shown <= total, offset <= total - shown else {
            throw Divergence(description: "window \(offset)+\(shown) is outside the \(total) items")
        }
        let anchor = value["anchor"]
        return WindowPlace(
            range: WindowRange(lower: offset, upper: offset + shown, total: total), isAnchored: anchor != nil,
            anchor: anchor == .null || anchor == nil ? nil : try identifier(anchor))
    }

    private static func version(_ value: JSONValue?) throws(Divergence) -> UInt64 {
        guard case .number(let text) = value, let version = UInt64(text) else {
            throw Divergence(description: "bad version \(value?.canonicalText ?? "none")")
        }
        return version
    }

    private static func identifier(_ value: JSONValue?) throws(Divergence) -> Identifier {
        switch value {
        case .string(let text): return Identifier(text)
        case .number(let text): return Identifier(integerText: text)
        default: throw Divergence(description: "bad identifier \(value?.canonicalText ?? "none")")
        }
    }

    private static func int(_ value: JSONValue?) throws(Divergence) -> Int {
        guard case .number(let text) = value, let number = Int(text) else {
            throw Divergence(description: "bad index \(value?.canonicalText ?? "none")")
        }
        return number
    }

    private static func path(_ value: JSONValue?) throws(Divergence) -> ItemPath {
        guard case .array(let pair) = value, pair.count == 2 else {
            throw Divergence(description: "bad item path \(value?.canonicalText ?? "none")")
        }
        return ItemPath(try int(pair[0]), try int(pair[1]))
    }

    private static func list(_ value: JSONValue?, _ key: String) -> [JSONValue] {
        guard case .array(let elements) = value?[key] else { return [] }
        return elements
    }

    /// The `sections` of a snapshot event or `get` response as plain values.
    public static func outline(_ value: JSONValue?) throws(Divergence) -> [SectionOutline] {
        guard case .array(let rawSections) = value else { throw Divergence(description: "no sections") }
        var result: [SectionOutline] = []
        for raw in rawSections {
            var section = SectionOutline(id: try identifier(raw["id"]), data: raw["data"]?.asData)
            if case .array(let rawItems) = raw["items"] {
                for rawItem in rawItems {
                    if case .object = rawItem {
                        section.items.append(Item(id: try identifier(rawItem["id"]), data: rawItem["data"]?.asData))
                    } else {
                        section.items.append(Item(id: try identifier(rawItem)))
                    }
                }
            }
            result.append(section)
        }
        return result
    }

    /// A changeset event's `sections` and `items` as a `Changeset`.
    public static func changeset(_ event: JSONValue) throws(Divergence) -> Changeset {
        var changeset = Changeset()
        changeset.sections = try changes(event["sections"], key: "index", position: int)
        changeset.items = try changes(event["items"], key: "at", position: path)
        return changeset
    }

    /// One of a changeset's two lists, its positions under `key` (and a move's `from` and `to`)
    /// read by `position`.
    private static func changes<Position>(
        _ value: JSONValue?, key: String, position: (JSONValue?) throws(Divergence) -> Position
    ) throws(Divergence) -> Changes<Position> {
        var changes = Changes<Position>()
        for entry in list(value, "deleted") {
            changes.deleted.append(.init(at: try position(entry[key]), id: try identifier(entry["id"])))
        }
        for entry in list(value, "inserted") {
            changes.inserted.append(
                .init(at: try position(entry[key]), id: try identifier(entry["id"]), data: entry["data"]?.asData))
        }
        for entry in list(value, "moved") {
            changes.moved.append(
                .init(from: try position(entry["from"]), to: try position(entry["to"]), id: try identifier(entry["id"]))
            )
        }
        for entry in list(value, "updated") {
            changes.updated.append(
                .init(at: try position(entry[key]), id: try identifier(entry["id"]), data: entry["data"]?.asData))
        }
        for entry in list(value, "reloaded") {
            changes.reloaded.append(.init(at: try position(entry[key]), id: try identifier(entry["id"])))
        }
        return changes
    }
}

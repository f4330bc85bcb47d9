import DiffcastCore

/// Why a line is not what the wire format says it should be.
public struct Malformed: Error, CustomStringConvertible {
    public let description: String

    public init(description: String) {
        self.description = description
    }
}

/// An event line as a subscriber received it: its digest is the sender's word, which a mirror
/// checks against the state it computes.
public enum ReceivedEvent: Sendable {
    /// The whole state at `version` (of a window's view, with `window`).
    case snapshot(version: UInt64, epoch: String?, sections: [SectionOutline], window: WindowPlace?, digest: String?)
    /// The changes from `from` to `version`; `from` is nil in a compact changeset
    /// (`CompactEvents`), where it is the version the subscriber holds.
    case changeset(from: UInt64?, version: UInt64, Changeset, window: WindowPlace?, digest: String?)
    /// The collection was dropped.
    case dropped
}

/// Reads the events (and the `sections` of a `get` answer) that `WireEncoder` writes, as typed
/// values: the decoding half of the wire format, used by clients, the mirror, checkpoints and
/// shared-log snapshots. It checks shapes, not meaning: whether an event fits a mirror is the
/// mirror's to say.
public enum EventDecoder {
    /// A parsed event line as a `ReceivedEvent`.
    public static func event(_ value: JSONValue) throws(Malformed) -> ReceivedEvent {
        let digest: String? = if case .string(let text) = value["digest"] { text } else { nil }
        switch value["event"] {
        case .string("snapshot"):
            let epoch: String? = if case .string(let text) = value["epoch"] { text } else { nil }
            return .snapshot(
                version: try version(value["version"]), epoch: epoch, sections: try outline(value["sections"]),
                window: try window(value["window"]), digest: digest)
        case .string("changeset"):
            return .changeset(
                from: value["from"] == nil ? nil : try version(value["from"]), version: try version(value["version"]),
                try changeset(value),
                window: try window(value["window"]), digest: digest)
        case .string("dropped"):
            return .dropped
        default:
            throw Malformed(description: "not an event: \(value.canonicalText.prefix(120))")
        }
    }

    /// The `sections` of a snapshot event or `get` response as plain values.
    public static func outline(_ value: JSONValue?) throws(Malformed) -> [SectionOutline] {
        guard case .array(let rawSections) = value else { throw Malformed(description: "no sections") }
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
    public static func changeset(_ event: JSONValue) throws(Malformed) -> Changeset {
        var changeset = Changeset()
        changeset.sections = try changes(event["sections"], key: "index", position: int)
        changeset.items = try changes(event["items"], key: "at", position: path)
        return changeset
    }

    /// An event's `window` object: offset, count and total, and for anchor windows the anchor.
    private static func window(_ value: JSONValue?) throws(Malformed) -> WindowPlace? {
        guard let value else { return nil }
        func count(_ key: String) throws(Malformed) -> Int {
            guard case .number(let text) = value[key], let number = Int(text), number >= 0 else {
                throw Malformed(description: "bad window \(key) \(value[key]?.canonicalText ?? "none")")
            }
            return number
        }
        let (offset, shown, total) = (try count("offset"), try count("count"), try count("total"))
        guard shown <= total, offset <= total - shown else {
            throw Malformed(description: "window \(offset)+\(shown) is outside the \(total) items")
        }
        let anchor = value["anchor"]
        return WindowPlace(
            range: WindowRange(lower: offset, upper: offset + shown, total: total), isAnchored: anchor != nil,
            anchor: anchor == .null || anchor == nil ? nil : try identifier(anchor))
    }

    package static func version(_ value: JSONValue?) throws(Malformed) -> UInt64 {
        guard case .number(let text) = value, let version = UInt64(text) else {
            throw Malformed(description: "bad version \(value?.canonicalText ?? "none")")
        }
        return version
    }

    private static func identifier(_ value: JSONValue?) throws(Malformed) -> Identifier {
        switch value {
        case .string(let text): return Identifier(text)
        case .number(let text): return Identifier(integerText: text)
        default: throw Malformed(description: "bad identifier \(value?.canonicalText ?? "none")")
        }
    }

    private static func int(_ value: JSONValue?) throws(Malformed) -> Int {
        guard case .number(let text) = value, let number = Int(text) else {
            throw Malformed(description: "bad index \(value?.canonicalText ?? "none")")
        }
        return number
    }

    private static func path(_ value: JSONValue?) throws(Malformed) -> ItemPath {
        guard case .array(let pair) = value, pair.count == 2 else {
            throw Malformed(description: "bad item path \(value?.canonicalText ?? "none")")
        }
        return ItemPath(try int(pair[0]), try int(pair[1]))
    }

    private static func list(_ value: JSONValue?, _ key: String) -> [JSONValue] {
        guard case .array(let elements) = value?[key] else { return [] }
        return elements
    }

    /// One of a changeset's two lists, its positions under `key` (and a move's `from` and `to`)
    /// read by `position`.
    private static func changes<Position>(
        _ value: JSONValue?, key: String, position: (JSONValue?) throws(Malformed) -> Position
    ) throws(Malformed) -> Changes<Position> {
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

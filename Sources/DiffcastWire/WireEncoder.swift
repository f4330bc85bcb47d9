import DiffcastCore

/// Writes the lines of SPEC.md — responses and events — as bytes, each ending in `\n`.
/// An event is encoded once and the same bytes go to every subscriber.
public enum WireEncoder {
    /// `{"ok":true,"id":…,"op":…` followed by `fields` (members written by the caller,
    /// each starting with a comma) and `}`.
    public static func success(
        id: JSONText?, op: String?, fields: (inout JSONOutput) -> Void = { _ in }
    ) -> [UInt8] {
        var output = JSONOutput()
        output.appendRaw("{\"ok\":true")
        appendIDAndOp(id: id, op: op, into: &output)
        fields(&output)
        output.appendRaw("}\n")
        return output.bytes
    }

    public static func failure(id: JSONText?, op: String?, error: DiffcastError) -> [UInt8] {
        var output = JSONOutput()
        output.appendRaw("{\"ok\":false")
        appendIDAndOp(id: id, op: op, into: &output)
        output.appendRaw(",\"error\":{\"code\":")
        output.append(string: error.code)
        output.appendRaw(",\"message\":")
        output.append(string: error.message)
        output.appendRaw("}}\n")
        return output.bytes
    }

    private static func appendIDAndOp(id: JSONText?, op: String?, into output: inout JSONOutput) {
        if let id {
            output.appendRaw(",\"id\":")
            output.appendRaw(id)
        }
        if let op {
            output.appendRaw(",\"op\":")
            output.append(string: op)
        }
    }

    /// The members `"version":V,"epoch":E,"sections":[…],"digest":D` that `get` and snapshot
    /// events share, each preceded by a comma.
    public static func appendState(
        of snapshot: Snapshot, version: UInt64, epoch: String, into output: inout JSONOutput
    ) {
        output.appendRaw(",\"epoch\":")
        output.append(string: epoch)
        output.appendRaw(",\"version\":")
        output.append(version)
        output.appendRaw(",\"sections\":[")
        for (sectionIndex, section) in snapshot.sections.enumerated() {
            if sectionIndex > 0 { output.appendByte(UInt8(ascii: ",")) }
            output.appendRaw("{\"id\":")
            output.append(identifier: section.id)
            if let data = section.data {
                output.appendRaw(",\"data\":")
                output.appendRaw(data)
            }
            output.appendRaw(",\"items\":[")
            for (itemIndex, item) in section.items.enumerated() {
                if itemIndex > 0 { output.appendByte(UInt8(ascii: ",")) }
                if let data = item.data {
                    output.appendRaw("{\"id\":")
                    output.append(identifier: item.id)
                    output.appendRaw(",\"data\":")
                    output.appendRaw(data)
                    output.appendByte(UInt8(ascii: "}"))
                } else {
                    output.append(identifier: item.id)
                }
            }
            output.appendRaw("]}")
        }
        output.appendRaw("],\"digest\":\"")
        output.appendRaw(text: Digest(of: snapshot).description)
        output.appendByte(UInt8(ascii: "\""))
    }

    public static func snapshotEvent(collection: String, epoch: String, version: UInt64, snapshot: Snapshot) -> [UInt8]
    {
        var output = JSONOutput(reservingCapacity: 64 + snapshot.itemCount * 16)
        output.appendRaw("{\"event\":\"snapshot\",\"collection\":")
        output.append(string: collection)
        appendState(of: snapshot, version: version, epoch: epoch, into: &output)
        output.appendRaw("}\n")
        return output.bytes
    }

    /// A changeset event; with `window`, a windowed subscriber's (its view's changes and digest).
    public static func changesetEvent(
        collection: String, epoch: String, from: UInt64, to version: UInt64, changeset: Changeset,
        window: WindowPlace? = nil, digest: Digest
    ) -> [UInt8] {
        var output = JSONOutput(reservingCapacity: estimatedLength(of: changeset))
        appendChangesetHead(collection: collection, epoch: epoch, into: &output)
        output.append(from)
        appendChangesetTail(version: version, changeset: changeset, window: window, digest: digest, into: &output)
        return output.bytes
    }

    /// A windowed subscription's snapshot: the view, its place and its digest.
    public static func windowSnapshotEvent(
        collection: String, epoch: String, version: UInt64, view: Snapshot, place: WindowPlace
    ) -> [UInt8] {
        var output = JSONOutput(reservingCapacity: 96 + view.itemCount * 16)
        output.appendRaw("{\"event\":\"snapshot\",\"collection\":")
        output.append(string: collection)
        appendState(of: view, version: version, epoch: epoch, into: &output)
        appendWindow(place, into: &output)
        output.appendRaw("}\n")
        return output.bytes
    }

    /// A windowed changeset, encoded once for every subscriber of the window; each gets it with
    /// the `from` of its own previous event.
    public static func windowChangesetEvent(
        collection: String, epoch: String, to version: UInt64, changeset: Changeset, place: WindowPlace,
        digest: Digest
    ) -> WindowEvent {
        var head = JSONOutput()
        appendChangesetHead(collection: collection, epoch: epoch, into: &head)
        var tail = JSONOutput(reservingCapacity: estimatedLength(of: changeset))
        appendChangesetTail(version: version, changeset: changeset, window: place, digest: digest, into: &tail)
        return WindowEvent(head: head.bytes, tail: tail.bytes)
    }

    /// `,"window":{"offset":…,"count":…,"total":…}`, with `"anchor"` for anchor windows.
    public static func appendWindow(_ place: WindowPlace, into output: inout JSONOutput) {
        output.appendRaw(",\"window\":{\"offset\":")
        output.append(UInt64(place.range.lower))
        output.appendRaw(",\"count\":")
        output.append(UInt64(place.range.count))
        output.appendRaw(",\"total\":")
        output.append(UInt64(place.range.total))
        if place.isAnchored {
            output.appendRaw(",\"anchor\":")
            if let anchor = place.anchor {
                output.append(identifier: anchor)
            } else {
                output.appendRaw("null")
            }
        }
        output.appendByte(UInt8(ascii: "}"))
    }

    /// `{"event":"changeset","collection":…,"epoch":…,"from":` (the version follows).
    private static func appendChangesetHead(collection: String, epoch: String, into output: inout JSONOutput) {
        output.appendRaw("{\"event\":\"changeset\",\"collection\":")
        output.append(string: collection)
        output.appendRaw(",\"epoch\":")
        output.append(string: epoch)
        output.appendRaw(",\"from\":")
    }

    /// Everything of a changeset event after its `from` number.
    private static func appendChangesetTail(
        version: UInt64, changeset: Changeset, window: WindowPlace?, digest: Digest, into output: inout JSONOutput
    ) {
        output.appendRaw(",\"version\":")
        output.append(version)
        if !changeset.sections.isEmpty {
            output.appendRaw(",\"sections\":")
            appendChanges(changeset.sections, into: &output)
        }
        if !changeset.items.isEmpty {
            output.appendRaw(",\"items\":")
            appendChanges(changeset.items, into: &output)
        }
        if let window { appendWindow(window, into: &output) }
        output.appendRaw(",\"digest\":\"")
        output.appendRaw(text: digest.description)
        output.appendRaw("\"}\n")
    }

    public static func droppedEvent(collection: String) -> [UInt8] {
        var output = JSONOutput()
        output.appendRaw("{\"event\":\"dropped\",\"collection\":")
        output.append(string: collection)
        output.appendRaw("}\n")
        return output.bytes
    }

    /// `{"event":"revoked",…}`: a subscription ended because its holder's rights did.
    public static func revokedEvent(collection: String, message: String) -> [UInt8] {
        var output = JSONOutput()
        output.appendRaw("{\"event\":\"revoked\",\"collection\":")
        output.append(string: collection)
        appendError(code: "unauthorized", message: message, into: &output)
        return output.bytes
    }

    /// `{"event":"error",…}` sent before the daemon disconnects a client by policy.
    public static func disconnectEvent(code: String, message: String) -> [UInt8] {
        var output = JSONOutput()
        output.appendRaw("{\"event\":\"error\"")
        appendError(code: code, message: message, into: &output)
        return output.bytes
    }

    /// `,"error":{"code":…,"message":…}}` and the newline: the end of an event that reports one.
    private static func appendError(code: String, message: String, into output: inout JSONOutput) {
        output.appendRaw(",\"error\":{\"code\":")
        output.append(string: code)
        output.appendRaw(",\"message\":")
        output.append(string: message)
        output.appendRaw("}}\n")
    }

    // MARK: - Changeset parts

    private static func appendList<Element>(
        _ key: StaticString, _ elements: [Element], first: inout Bool, into output: inout JSONOutput,
        _ body: (Element, inout JSONOutput) -> Void
    ) {
        guard !elements.isEmpty else { return }
        output.appendRaw(first ? "" : ",")
        first = false
        output.appendRaw(key)
        output.appendRaw(":[")
        for (index, element) in elements.enumerated() {
            if index > 0 { output.appendByte(UInt8(ascii: ",")) }
            body(element, &output)
        }
        output.appendByte(UInt8(ascii: "]"))
    }

    /// One list of changes, sections' or items': `{"deleted":[…],"inserted":[…],…}` with each
    /// position written as its kind says (`"index":N` or `"at":[S,I]`).
    private static func appendChanges<Position: WirePosition>(
        _ changes: Changes<Position>, into output: inout JSONOutput
    ) {
        var first = true
        output.appendByte(UInt8(ascii: "{"))
        appendList("\"deleted\"", changes.deleted, first: &first, into: &output) { deletion, out in
            appendEntry(at: deletion.at, id: deletion.id, dataFollows: false, into: &out)
            out.appendByte(UInt8(ascii: "}"))
        }
        appendList("\"inserted\"", changes.inserted, first: &first, into: &output) { insertion, out in
            appendEntry(at: insertion.at, id: insertion.id, dataFollows: insertion.data != nil, into: &out)
            if let data = insertion.data { out.appendRaw(data) }
            out.appendByte(UInt8(ascii: "}"))
        }
        appendList("\"moved\"", changes.moved, first: &first, into: &output) { move, out in
            out.appendRaw("{\"from\":")
            Position.append(move.from, into: &out)
            out.appendRaw(",\"to\":")
            Position.append(move.to, into: &out)
            out.appendRaw(",\"id\":")
            out.append(identifier: move.id)
            out.appendByte(UInt8(ascii: "}"))
        }
        appendList("\"updated\"", changes.updated, first: &first, into: &output) { update, out in
            appendEntry(at: update.at, id: update.id, dataFollows: true, into: &out)
            out.append(data: update.data)
            out.appendByte(UInt8(ascii: "}"))
        }
        appendList("\"reloaded\"", changes.reloaded, first: &first, into: &output) { reload, out in
            appendEntry(at: reload.at, id: reload.id, dataFollows: false, into: &out)
            out.appendByte(UInt8(ascii: "}"))
        }
        output.appendByte(UInt8(ascii: "}"))
    }

    /// An entry's opening up to its data: `{"index":N,"id":ID` or `{"at":[S,I],"id":ID`, then
    /// `,"data":` when data follows, written in one piece (`JSONOutput.appendWritten`).
    private static func appendEntry<Position: WirePosition>(
        at position: Position, id: Identifier, dataFollows: Bool, into output: inout JSONOutput
    ) {
        let room = Position.maximumMemberLength + 14 + ByteWriter.maximumQuotedLength(of: id.text)
        output.appendWritten(maximumCount: room) { writer in
            Position.writeMember(position, into: &writer)
            writer.write(",\"id\":")
            writer.write(quoted: id.text)
            if dataFollows { writer.write(",\"data\":") }
        }
    }

    /// Room for a changeset event: a few dozen bytes per listed item, plus the data it
    /// carries, so that a feed's event is written into one allocation, not grown by doubling.
    private static func estimatedLength(of changeset: Changeset) -> Int {
        let items = changeset.items
        let listed =
            items.deleted.count + items.inserted.count + items.moved.count + items.updated.count
            + items.reloaded.count
        let data =
            items.inserted.reduce(0) { $0 + ($1.data?.text.utf8.count ?? 0) }
            + items.updated.reduce(0) { $0 + ($1.data?.text.utf8.count ?? 4) }
        return 256 + 48 * listed + data
    }
}

/// A windowed changeset event without its `from`: the bytes before and after that number.
public struct WindowEvent: Sendable {
    public let head: [UInt8]
    public let tail: [UInt8]

    public init(head: [UInt8], tail: [UInt8]) {
        self.head = head
        self.tail = tail
    }

    /// The changes of a window's view at `version`, its place and the view's digest, for every
    /// subscriber of the window.
    public init(
        collection: String, epoch: String, version: UInt64, _ changeset: Changeset, place: WindowPlace, digest: Digest
    ) {
        self = WireEncoder.windowChangesetEvent(
            collection: collection, epoch: epoch, to: version, changeset: changeset, place: place, digest: digest)
    }

    /// The event line for a subscriber whose previous event brought `from`.
    public func bytes(from: UInt64) -> [UInt8] {
        var output = JSONOutput(reservingCapacity: head.count + 20 + tail.count)
        output.appendRaw(bytes: head)
        output.append(from)
        output.appendRaw(bytes: tail)
        return output.bytes
    }
}

extension Window {
    /// The window as a request's `window` member: `{"first":N}`, `{"last":N}` or
    /// `{"anchor":ID,"before":B,"after":A}`.
    public var jsonValue: JSONValue {
        switch self {
        case .first(let count): ["first": .number(String(count))]
        case .last(let count): ["last": .number(String(count))]
        case .anchor(let id, let before, let after):
            ["anchor": .string(id.text), "before": .number(String(before)), "after": .number(String(after))]
        }
    }
}

/// How a change's position is written: a section's as `"index":N`, an item's as `"at":[S,I]`
/// (SPEC.md's changeset lists).
protocol WirePosition: Hashable, Sendable, Comparable {
    /// The most bytes `writeMember` writes.
    static var maximumMemberLength: Int { get }
    /// `{"index":N` or `{"at":[S,I]`: a change's opening and its position.
    static func writeMember(_ position: Self, into writer: inout ByteWriter)
    /// The position's value alone (a move's `from` and `to`).
    static func append(_ position: Self, into output: inout JSONOutput)
}

extension Int: WirePosition {
    static var maximumMemberLength: Int { 9 + ByteWriter.maximumDecimalLength }

    static func writeMember(_ position: Int, into writer: inout ByteWriter) {
        writer.write("{\"index\":")
        writer.write(position)
    }

    static func append(_ position: Int, into output: inout JSONOutput) {
        output.append(position)
    }
}

extension ItemPath: WirePosition {
    static var maximumMemberLength: Int { 9 + 2 * ByteWriter.maximumDecimalLength }

    static func writeMember(_ position: ItemPath, into writer: inout ByteWriter) {
        writer.write("{\"at\":[")
        writer.write(position.section)
        writer.write(byte: UInt8(ascii: ","))
        writer.write(position.item)
        writer.write(byte: UInt8(ascii: "]"))
    }

    static func append(_ position: ItemPath, into output: inout JSONOutput) {
        output.appendByte(UInt8(ascii: "["))
        output.append(position.section)
        output.appendByte(UInt8(ascii: ","))
        output.append(position.item)
        output.appendByte(UInt8(ascii: "]"))
    }
}

import DiffcastCore

// The tests' own idea of SPEC.md, shared by every test target, written apart from the code it checks: states as plain byte
// arrays, a changeset applier that takes every list in the order given and rejects anything
// out of place, the move-minimality law, and a digest checked against golden values of
// ../shared/conformance/model.py. Nothing here calls DiffcastCore's differ, applier or digest.

/// An item as bytes: identity and content, nothing else.
public struct PlainItem: Equatable, CustomStringConvertible {
    public var id: [UInt8]
    public var data: [UInt8]?

    public init(id: [UInt8], data: [UInt8]?) {
        self.id = id
        self.data = data
    }

    public var description: String {
        String(decoding: id, as: UTF8.self) + (data.map { "=" + String(decoding: $0, as: UTF8.self) } ?? "")
    }
}

public struct PlainSection: Equatable {
    public var id: [UInt8]
    public var data: [UInt8]?
    public var items: [PlainItem]

    public init(id: [UInt8], data: [UInt8]?, items: [PlainItem]) {
        self.id = id
        self.data = data
        self.items = items
    }
}

public typealias PlainState = [PlainSection]

public func plain(_ snapshot: Snapshot) -> PlainState {
    snapshot.sections.map { section in
        PlainSection(
            id: Array(section.id.text.utf8), data: section.data.map { Array($0.text.utf8) },
            items: section.items.map {
                PlainItem(id: Array($0.id.text.utf8), data: $0.data.map { Array($0.text.utf8) })
            }
        )
    }
}

public func bytes(_ id: Identifier) -> [UInt8] { Array(id.text.utf8) }
public func bytes(_ data: JSONText?) -> [UInt8]? { data.map { Array($0.text.utf8) } }

public struct OracleViolation: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// SPEC.md's apply algorithm, strict: lists must be in ascending order without repeats,
/// deletions and moves must name the identifier found at their old position, updates must hold
/// the item they name and (unless `updatesMayRepeatData`, for reconfigures) change its data.
/// Lists are applied in the order given: nothing is sorted here.
public enum StrictApplier {
    public static func apply(_ changeset: Changeset, to old: PlainState, updatesMayRepeatData: Bool = false) throws
        -> PlainState
    {
        let sections = changeset.sections
        let items = changeset.items
        try ascending(sections.deleted.map(\.at), "sections.deleted")
        try ascending(sections.inserted.map(\.at), "sections.inserted")
        try ascending(sections.moved.map(\.to), "sections.moved")
        try ascending(sections.updated.map(\.at), "sections.updated")
        try ascending(sections.reloaded.map(\.at), "sections.reloaded")
        try ascending(items.deleted.map { [$0.at.section, $0.at.item] }, "items.deleted")
        try ascending(items.inserted.map { [$0.at.section, $0.at.item] }, "items.inserted")
        try ascending(items.moved.map { [$0.to.section, $0.to.item] }, "items.moved")
        try ascending(items.updated.map { [$0.at.section, $0.at.item] }, "items.updated")
        try ascending(items.reloaded.map { [$0.at.section, $0.at.item] }, "items.reloaded")

        var state = old
        // 1. Items out (old coordinates), from the highest position down.
        var outs: [(section: Int, item: Int)] = []
        var movedItems: [[UInt8]: PlainItem] = [:]
        for deletion in items.deleted {
            let item = try itemAt(deletion.at.section, deletion.at.item, in: state, "items.deleted")
            guard item.id == bytes(deletion.id) else {
                throw OracleViolation("items.deleted \(deletion.at) holds \(item), not \(deletion.id)")
            }
            outs.append((deletion.at.section, deletion.at.item))
        }
        for move in items.moved {
            let item = try itemAt(move.from.section, move.from.item, in: state, "items.moved")
            guard item.id == bytes(move.id) else {
                throw OracleViolation("items.moved from \(move.from) holds \(item), not \(move.id)")
            }
            guard movedItems.updateValue(item, forKey: item.id) == nil else {
                throw OracleViolation("item \(move.id) moved twice")
            }
            outs.append((move.from.section, move.from.item))
        }
        outs.sort { ($0.section, $0.item) > ($1.section, $1.item) }
        for (earlier, later) in zip(outs, outs.dropFirst()) where earlier == later {
            throw OracleViolation("item [\(earlier.section),\(earlier.item)] taken out twice")
        }
        for out in outs { state[out.section].items.remove(at: out.item) }
        // 2. Sections out (old indices).
        var sectionOuts: [Int] = []
        var movedSections: [[UInt8]: PlainSection] = [:]
        for deletion in sections.deleted {
            guard state.indices.contains(deletion.at), state[deletion.at].id == bytes(deletion.id) else {
                throw OracleViolation("sections.deleted \(deletion.at) does not hold \(deletion.id)")
            }
            sectionOuts.append(deletion.at)
        }
        for move in sections.moved {
            guard state.indices.contains(move.from), state[move.from].id == bytes(move.id) else {
                throw OracleViolation("sections.moved from \(move.from) does not hold \(move.id)")
            }
            movedSections[bytes(move.id)] = state[move.from]
            sectionOuts.append(move.from)
        }
        sectionOuts.sort(by: >)
        for (earlier, later) in zip(sectionOuts, sectionOuts.dropFirst()) where earlier == later {
            throw OracleViolation("section \(earlier) taken out twice")
        }
        for index in sectionOuts { state.remove(at: index) }
        // 3. Sections in: inserted and moved, merged in the order given (both ascending).
        var sectionIns = sections.inserted.map {
            ($0.at, PlainSection(id: bytes($0.id), data: bytes($0.data), items: []))
        }
        for move in sections.moved {
            sectionIns.append((move.to, movedSections[bytes(move.id)] ?? PlainSection(id: [], data: nil, items: [])))
        }
        for (index, section) in try merged(sectionIns, by: { [$0.0] }, "section arrivals") {
            guard index <= state.count else { throw OracleViolation("section arrives at \(index) of \(state.count)") }
            state.insert(section, at: index)
        }
        // 4. Items in.
        var itemIns = items.inserted.map {
            ([$0.at.section, $0.at.item], PlainItem(id: bytes($0.id), data: bytes($0.data)))
        }
        for move in items.moved {
            guard let item = movedItems.removeValue(forKey: bytes(move.id)) else { continue }
            itemIns.append(([move.to.section, move.to.item], item))
        }
        for arrival in try merged(itemIns, by: { $0.0 }, "item arrivals") {
            let (section, index) = (arrival.0[0], arrival.0[1])
            guard state.indices.contains(section), index <= state[section].items.count else {
                throw OracleViolation("item arrives at [\(section),\(index)], out of range")
            }
            state[section].items.insert(arrival.1, at: index)
        }
        // 5. Data.
        for update in sections.updated {
            guard state.indices.contains(update.at), state[update.at].id == bytes(update.id) else {
                throw OracleViolation("sections.updated \(update.at) does not hold \(update.id)")
            }
            guard state[update.at].data != bytes(update.data) else {
                throw OracleViolation("sections.updated \(update.id) repeats its data")
            }
            state[update.at].data = bytes(update.data)
        }
        let insertedIDs = Set(items.inserted.map { bytes($0.id) })
        for update in items.updated {
            let item = try itemAt(update.at.section, update.at.item, in: state, "items.updated")
            guard item.id == bytes(update.id) else {
                throw OracleViolation("items.updated \(update.at) holds \(item), not \(update.id)")
            }
            // An item inserted by the same changeset is listed as updated only as a reconfigure's
            // mark (check.py asks for every mark of a version, also on what it inserted).
            guard !insertedIDs.contains(item.id) || updatesMayRepeatData else {
                throw OracleViolation("items.updated \(update.id) was inserted by the same changeset")
            }
            guard updatesMayRepeatData || item.data != bytes(update.data) else {
                throw OracleViolation("items.updated \(update.id) repeats its data")
            }
            state[update.at.section].items[update.at.item].data = bytes(update.data)
        }
        for reload in items.reloaded {
            let item = try itemAt(reload.at.section, reload.at.item, in: state, "items.reloaded")
            guard item.id == bytes(reload.id) else {
                throw OracleViolation("items.reloaded \(reload.at) holds \(item), not \(reload.id)")
            }
        }
        return state
    }

    private static func itemAt(_ section: Int, _ item: Int, in state: PlainState, _ what: String) throws
        -> PlainItem
    {
        guard state.indices.contains(section), state[section].items.indices.contains(item) else {
            throw OracleViolation("\(what) [\(section),\(item)] out of range")
        }
        return state[section].items[item]
    }

    private static func ascending(_ keys: [Int], _ what: String) throws {
        try ascending(keys.map { [$0] }, what)
    }

    private static func ascending(_ keys: [[Int]], _ what: String) throws {
        for (earlier, later) in zip(keys, keys.dropFirst()) where !earlier.lexicographicallyPrecedes(later) {
            throw OracleViolation("\(what) not in strictly ascending order: \(earlier) then \(later)")
        }
    }

    /// Two ascending runs (as given) merged; equal keys from both are a conflict.
    private static func merged<Element>(
        _ elements: [Element], by key: (Element) -> [Int], _ what: String
    ) throws -> [Element] {
        let ordered = elements.enumerated().sorted { (key($0.element) + [$0.offset]) < (key($1.element) + [$1.offset]) }
        for (earlier, later) in zip(ordered, ordered.dropFirst()) where key(earlier.element) == key(later.element) {
            throw OracleViolation("\(what): two arrive at \(key(later.element))")
        }
        return ordered.map(\.element)
    }
}

private func < (lhs: [Int], rhs: [Int]) -> Bool { lhs.lexicographicallyPrecedes(rhs) }

/// The move-minimality law of SPEC.md: a section or item is moved only when its relative order
/// among the survivors changed, and the survivors on one longest increasing subsequence stay.
/// Items that change section are always moved.
public enum MoveLaw {
    public static func expectedMoves(from old: PlainState, to new: PlainState) -> (sections: Int, items: Int) {
        var oldSectionIndex: [[UInt8]: Int] = [:]
        for (index, section) in old.enumerated() { oldSectionIndex[section.id] = index }
        let survivingSections = new.compactMap { oldSectionIndex[$0.id] }
        let sectionMoves = survivingSections.count - lisLength(survivingSections)
        var oldPlace: [[UInt8]: (section: [UInt8], index: Int)] = [:]
        for section in old {
            for (index, item) in section.items.enumerated() { oldPlace[item.id] = (section.id, index) }
        }
        var itemMoves = 0
        for section in new {
            var sameSection: [Int] = []
            for item in section.items {
                guard let place = oldPlace[item.id] else { continue }
                if place.section == section.id { sameSection.append(place.index) } else { itemMoves += 1 }
            }
            itemMoves += sameSection.count - lisLength(sameSection)
        }
        return (sectionMoves, itemMoves)
    }

    /// Length of a longest strictly increasing subsequence, by patience sorting.
    public static func lisLength(_ values: [Int]) -> Int {
        var tails: [Int] = []
        for value in values {
            var low = 0
            var high = tails.count
            while low < high {
                let middle = (low + high) / 2
                if tails[middle] < value { low = middle + 1 } else { high = middle }
            }
            if low == tails.count { tails.append(value) } else { tails[low] = value }
        }
        return tails.count
    }
}

/// Checks one changeset from `old` to `new` with every oracle above.
public func checkStrictly(
    _ changeset: Changeset, from old: PlainState, to new: PlainState, updatesMayRepeatData: Bool = false
) throws {
    let applied = try StrictApplier.apply(changeset, to: old, updatesMayRepeatData: updatesMayRepeatData)
    guard applied == new else {
        throw OracleViolation("applying the changeset gives another state than the new one")
    }
    try checkMoves(changeset, from: old, to: new)
}

/// Checks that a changeset from `old` to `new` lists no more moves than `MoveLaw` allows.
public func checkMoves(_ changeset: Changeset, from old: PlainState, to new: PlainState) throws {
    let expected = MoveLaw.expectedMoves(from: old, to: new)
    guard changeset.sections.moved.count == expected.sections, changeset.items.moved.count == expected.items else {
        throw OracleViolation(
            "moves listed (\(changeset.sections.moved.count), \(changeset.items.moved.count)) but the minimum is "
                + "(\(expected.sections), \(expected.items))")
    }
}

/// SPEC.md's digest, written out token by token over plain bytes. It is checked against golden
/// values from model.py (DigestTests) before anything else trusts it.
public enum ReferenceDigest {
    static let modulus: UInt64 = (1 << 61) - 1
    static let base: UInt64 = 1_099_511_628_211

    public static func of(_ state: PlainState) -> String {
        var digest: UInt64 = 0
        for section in state {
            digest = step(digest, token(UInt8(ascii: "S"), section.id, section.data))
            for item in section.items { digest = step(digest, token(UInt8(ascii: "I"), item.id, item.data)) }
        }
        let hex = String(digest, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    static func token(_ tag: UInt8, _ id: [UInt8], _ data: [UInt8]?) -> [UInt8] {
        [tag] + id + [0x0a] + (data ?? []) + [0x0a]
    }

    static func fnv1a(_ bytes: [UInt8]) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return hash
    }

    static func step(_ digest: UInt64, _ token: [UInt8]) -> UInt64 {
        let product = digest.multipliedFullWidth(by: base)
        let value = (UInt128(product.high) << 64 | UInt128(product.low)) % UInt128(modulus)
        return UInt64((value + UInt128(fnv1a(token) % modulus)) % UInt128(modulus))
    }
}

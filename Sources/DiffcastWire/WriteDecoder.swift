import DiffcastCore

/// Reads the arguments of a write op into a `WriteOperation`.
struct WriteDecoder {
    let limits: RequestLimits

    private static let sectionKeys = ["id", "data", "items"]
    private static let dataUpdateKeys = ["id", "data"]
    private static let itemKeys = ["id", "data"]

    func operation(_ op: Op, _ request: JSONView) throws(DiffcastError) -> WriteOperation {
        switch op {
        case .apply: return .apply(sections: try sections(request, "sections"))
        case .appendSections: return .appendSections(try sections(request, "sections"))
        case .insertSections:
            let inputs = try sections(request, "sections")
            return .insertSections(inputs, anchor: try anchor(request))
        case .deleteSections: return .deleteSections(try identifiers(request, "sections"))
        case .moveSection:
            let id = try identifier(try required(request, "section"), "section")
            return .moveSection(id, anchor: try anchor(request))
        case .reloadSections: return .reloadSections(try identifiers(request, "sections"))
        case .updateSections: return .updateSections(try dataUpdates(request, "sections"))
        case .appendItems:
            let newItems = try items(try required(request, "items"))
            var section: Identifier?
            if let value = request["section"] { section = try identifier(value, "section") }
            return .appendItems(newItems, section: section)
        case .insertItems:
            let newItems = try items(try required(request, "items"))
            return .insertItems(newItems, anchor: try anchor(request))
        case .deleteItems: return .deleteItems(try identifiers(request, "items"))
        case .deleteAll: return .deleteAll
        case .moveItem:
            let id = try identifier(try required(request, "item"), "item")
            return .moveItem(id, anchor: try anchor(request))
        case .reloadItems: return .reloadItems(try identifiers(request, "items"))
        case .reconfigureItems: return .reconfigureItems(try identifiers(request, "items"))
        case .updateItems: return .updateItems(try dataUpdates(request, "items"))
        case .batch: return .batch(try batch(request))
        case .ping, .auth, .list, .stats, .get, .subscribe, .unsubscribe, .drop, .window:
            throw .unknownOperation(op.name)
        }
    }

    private func batch(_ request: JSONView) throws(DiffcastError) -> [WriteOperation] {
        guard let entries = try required(request, "ops").elements else {
            throw .invalidArgument("'ops' must be a list of requests")
        }
        var operations: [WriteOperation] = []
        for (index, entry) in entries.enumerated() {
            do throws(DiffcastError) {
                guard let name = entry["op"]?.string else {
                    throw .invalidArgument("a batch entry needs an 'op'")
                }
                if name == "batch" || name == "drop" {
                    throw .invalidArgument("'\(name)' cannot be part of a batch")
                }
                guard let op = Op(name: name), op.isWrite else {
                    throw .unknownOperation(
                        name, didYouMean: Op.closest(to: name).flatMap { $0.isWrite ? $0.name : nil })
                }
                // Keys of sections and items are checked as they are read.
                try KeyCheck.only(op.batchEntryKeys, in: entry, "for '\(name)'")
                operations.append(try operation(op, entry))
            } catch {
                throw .inBatch(entry: index, error)
            }
        }
        return operations
    }

    private func required(_ request: JSONView, _ key: String) throws(DiffcastError) -> JSONView {
        guard let value = request[key] else { throw .invalidArgument("missing '\(key)'") }
        return value
    }

    private func list(_ value: JSONView, _ key: String) throws(DiffcastError) -> JSONView.Children {
        guard let elements = value.elements else { throw .invalidArgument("'\(key)' must be a list") }
        return elements
    }

    /// An identifier: a string of 1...limit bytes, or an integer taken as its decimal text.
    func identifier(_ value: JSONView, _ what: String) throws(DiffcastError) -> Identifier {
        if let text = value.string {
            let count = text.utf8.count
            guard count >= 1, count <= limits.maximumIdentifierBytes else {
                throw .invalidArgument(
                    "\(what) identifier must be 1-\(limits.maximumIdentifierBytes) bytes, got \(count)")
            }
            return Identifier(text)
        }
        if value.isIntegerNumber, let text = value.numberText {
            return Identifier(integerText: text)
        }
        throw .invalidArgument(
            "\(what) identifier must be a string or an integer, got \(value.canonicalText.prefix(64))")
    }

    private func identifiers(_ request: JSONView, _ key: String) throws(DiffcastError) -> [Identifier] {
        var result: [Identifier] = []
        for element in try list(try required(request, key), key) {
            result.append(try identifier(element, key == "sections" ? "section" : "item"))
        }
        return result
    }

    private func item(_ value: JSONView) throws(DiffcastError) -> Item {
        if value.isObject {
            try KeyCheck.only(Self.itemKeys, in: value, "in an item")
            guard let id = value["id"] else { throw .invalidArgument("item without 'id'") }
            return Item(id: try identifier(id, "item"), data: value["data"]?.asData)
        }
        return Item(id: try identifier(value, "item"))
    }

    private func items(_ value: JSONView) throws(DiffcastError) -> [Item] {
        var result: [Item] = []
        let elements = try list(value, "items")
        result.reserveCapacity(elements.count)
        for element in elements { result.append(try item(element)) }
        return result
    }

    private func sections(_ request: JSONView, _ key: String) throws(DiffcastError) -> [SectionInput] {
        var result: [SectionInput] = []
        for element in try list(try required(request, key), key) {
            guard element.isObject, let id = element["id"] else {
                throw .invalidArgument("section without 'id'")
            }
            try KeyCheck.only(Self.sectionKeys, in: element, "in a section")
            var sectionItems: [Item] = []
            if let value = element["items"], !value.isNull {
                sectionItems = try items(value)
            }
            result.append(
                SectionInput(id: try identifier(id, "section"), data: element["data"]?.asData, items: sectionItems))
        }
        return result
    }

    private func dataUpdates(_ request: JSONView, _ key: String) throws(DiffcastError) -> [DataUpdate] {
        var result: [DataUpdate] = []
        for element in try list(try required(request, key), key) {
            guard element.isObject, let id = element["id"] else {
                throw .invalidArgument("each of '\(key)' must be an object with 'id' and 'data'")
            }
            try KeyCheck.only(Self.dataUpdateKeys, in: element, "in an entry of '\(key)'")
            result.append(
                DataUpdate(
                    id: try identifier(id, key == "sections" ? "section" : "item"), data: element["data"]?.asData))
        }
        return result
    }

    private func anchor(_ request: JSONView) throws(DiffcastError) -> Anchor {
        switch (request["before"], request["after"]) {
        case (let before?, nil): return .before(try identifier(before, "anchor"))
        case (nil, let after?): return .after(try identifier(after, "anchor"))
        default: throw .invalidArgument("give exactly one of 'before' and 'after'")
        }
    }
}

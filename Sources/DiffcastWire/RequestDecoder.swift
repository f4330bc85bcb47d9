import DiffcastCore

/// Reads the members of one request object into a typed `Request`, checking every argument in
/// the order SPEC.md's reference model does, so the first culprit is the one named.
struct RequestDecoder {
    let object: JSONView
    let limits: RequestLimits
    let id: JSONText?

    init(object: JSONView, limits: RequestLimits) {
        self.object = object
        self.limits = limits
        self.id = object["id"].map { JSONText(canonical: $0.canonicalText) }
    }

    func decode() throws(RequestError) -> Request {
        guard let opValue = object["op"] else {
            throw RequestError(id: id, op: nil, error: .invalidArgument("missing 'op'"))
        }
        guard let op = opValue.string else {
            throw RequestError(id: id, op: nil, error: .invalidArgument("'op' must be a string"))
        }
        do {
            return Request(id: id, op: op, command: try command(op))
        } catch {
            throw RequestError(id: id, op: op, error: error)
        }
    }

    private func command(_ name: String) throws(DiffcastError) -> Command {
        guard let op = Op(name: name) else { throw .unknownOperation(name, didYouMean: Op.closest(to: name)?.name) }
        try KeyCheck.only(op.requestKeys, in: object, "for '\(name)'")
        switch op {
        case .ping: return .ping
        case .auth:
            guard let token = object["token"]?.string else { throw .invalidArgument("'token' must be a string") }
            return .auth(token: token)
        case .list: return .list()
        case .stats: return .stats
        case .get: return .get(collection: try collectionName(), window: try window(required: false))
        case .window:
            let name = try collectionName()
            guard let window = try window(required: true) else { throw .invalidArgument("missing 'window'") }
            return .window(collection: name, window)
        case .unsubscribe: return .unsubscribe(collection: try collectionName())
        case .drop: return .drop(collection: try collectionName())
        case .subscribe:
            let name = try collectionName()
            var since: UInt64?
            if let value = object["since"], !value.isNull {
                guard value.isIntegerNumber, let text = value.numberText, let version = UInt64(text) else {
                    throw .invalidArgument("'since' must be a version (an unsigned integer)")
                }
                since = version
            }
            var epoch: String?
            if let value = object["epoch"], !value.isNull {
                guard let text = value.string else { throw .invalidArgument("'epoch' must be a string") }
                epoch = text
            }
            let window = try window(required: false)
            if window != nil, since != nil || epoch != nil {
                throw .invalidArgument(
                    "'window' takes no 'since' or 'epoch': a windowed subscription starts with a snapshot")
            }
            return .subscribe(collection: name, since: since, epoch: epoch, window: window)
        default:
            let decoder = WriteDecoder(limits: limits)
            let name = try collectionName()
            return .write(collection: name, try decoder.operation(op, object))
        }
    }

    /// The request's `window` (SPEC.md "Windows"), checked in the reference model's order: a
    /// key W does not take (named), not exactly one of first/last/anchor, a count that is not an
    /// integer in range, then a count over `max_window_items`.
    private func window(required: Bool) throws(DiffcastError) -> Window? {
        guard let value = object["window"], !value.isNull else {
            if required { throw .invalidArgument("missing 'window'") }
            return nil
        }
        guard value.isObject else {
            throw .invalidArgument(
                "'window' must be an object like {\"first\": 50}, not \(value.canonicalText.prefix(64))")
        }
        try KeyCheck.only(["first", "last", "anchor", "before", "after"], in: value, "in a window")
        let forms = ["first", "last", "anchor"].filter { value[$0] != nil }
        guard forms.count == 1 else {
            throw .invalidArgument("a window takes exactly one of 'first', 'last' and 'anchor', got \(forms)")
        }
        let limit = limits.maximumWindowItems
        if let anchor = value["anchor"] {
            let before = try Self.count(value["before"], "before", least: 0) ?? 0
            let after = try Self.count(value["after"], "after", least: 0) ?? 0
            guard before < limit, after < limit, before + 1 + after <= limit else {
                throw .limitExceeded("a window's before + 1 + after is over max_window_items (\(limit))")
            }
            let id = try WriteDecoder(limits: limits).identifier(anchor, "anchor")
            return .anchor(id, before: before, after: after)
        }
        let form = forms[0]
        for key in ["before", "after"] where value[key] != nil {
            throw .invalidArgument("key '\(key)' in a '\(form)' window: only anchor windows take it")
        }
        guard let count = try Self.count(value[form], form, least: 1) else {
            throw .invalidArgument("missing '\(form)'")
        }
        guard count <= limit else {
            throw .limitExceeded("window \(form) \(count) is over max_window_items (\(limit))")
        }
        return form == "first" ? .first(count) : .last(count)
    }

    /// A window count: an integer of at least `least` (a huge one is `Int.max`, over any limit).
    private static func count(_ value: JSONView?, _ key: String, least: Int) throws(DiffcastError) -> Int? {
        guard let value else { return nil }
        guard value.isIntegerNumber, let text = value.numberText else {
            throw .invalidArgument(
                "window '\(key)' must be an integer >= \(least), not \(value.canonicalText.prefix(64))")
        }
        guard let count = Int(text) else {
            if text.hasPrefix("-") {
                throw .invalidArgument("window '\(key)' must be an integer >= \(least), not \(text.prefix(64))")
            }
            return Int.max
        }
        guard count >= least else {
            throw .invalidArgument("window '\(key)' must be an integer >= \(least), not \(count)")
        }
        return count
    }

    private func collectionName() throws(DiffcastError) -> String {
        guard let value = object["collection"] else { throw .invalidArgument("missing 'collection'") }
        guard let name = value.string else { throw .invalidName(value.canonicalText) }
        guard CollectionName.isValid(name) else { throw .invalidName(name) }
        return name
    }
}

/// The rule for collection names: 1-128 bytes of `[A-Za-z0-9._:-]`.
public enum CollectionName {
    public static func isValid(_ name: String) -> Bool {
        var name = name
        return name.withUTF8(isValid(utf8:))
    }

    /// The same rule on the name's bytes: a feed's append checks its name before making a
    /// `String` of it (through the string's UTF-8 view, the same check costs more).
    static func isValid(utf8 bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard (1...128).contains(bytes.count) else { return false }
        return bytes.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: ":"), UInt8(ascii: "-"):
                true
            default: false
            }
        }
    }
}

/// SPEC.md's rule that a key an op does not take is an error naming the key, so a typo
/// (`"dta"`, `"secton"`) never silently changes what a request means.
enum KeyCheck {
    /// The keys any request may carry.
    static let everyRequest = ["op", "id"]

    /// Throws `invalid_argument` for the first key of `object` not in `allowed` (compared as
    /// bytes), naming it and where it stood. It runs for every request and every item object, so
    /// it allocates nothing.
    static func only(_ allowed: [String], in object: JSONView, _ place: @autoclosure () -> String)
        throws(DiffcastError)
    {
        for member in object.members where !allowed.contains(where: { member.key.hasText($0) }) {
            throw .invalidArgument("unknown key '\(member.key.string ?? "")' \(place())")
        }
    }
}

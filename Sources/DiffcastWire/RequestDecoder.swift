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
        case .list: return .list
        case .stats: return .stats
        case .get: return .get(collection: try collectionName())
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
            return .subscribe(collection: name, since: since, epoch: epoch)
        default:
            let decoder = WriteDecoder(limits: limits)
            let name = try collectionName()
            return .write(collection: name, try decoder.operation(op, object))
        }
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
        let utf8 = name.utf8
        guard (1...128).contains(utf8.count) else { return false }
        return utf8.allSatisfy { byte in
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

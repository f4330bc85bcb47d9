import DiffcastCore

/// Turns one request line (without its `\n`) into a `Request`: either a JSON object, or the
/// inline form `OP [COLLECTION] [JSON-OBJECT]` of SPEC.md.
public struct RequestParser: Sendable {
    public var limits: RequestLimits

    public init(limits: RequestLimits = RequestLimits()) {
        self.limits = limits
    }

    public func parse(line: some Collection<UInt8>) throws(RequestError) -> Request {
        var bytes = Array(line)
        if bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
        let object = try requestObject(bytes)
        var request = try RequestDecoder(object: object, limits: limits).decode()
        request.line = bytes
        return request
    }

    private func requestObject(_ bytes: [UInt8]) throws(RequestError) -> [JSONValue.Member] {
        let start = bytes.firstIndex { $0 != UInt8(ascii: " ") && $0 != UInt8(ascii: "\t") } ?? bytes.count
        if start < bytes.count, bytes[start] == UInt8(ascii: "{") || bytes[start] == UInt8(ascii: "[") {
            let value = try json(bytes[start...])
            guard case .object(let members) = value else {
                throw RequestError(id: nil, op: nil, error: .parseError("a request must be a JSON object"))
            }
            return members
        }
        return try inlineObject(bytes[start...])
    }

    private func json(_ bytes: ArraySlice<UInt8>) throws(RequestError) -> JSONValue {
        do {
            return try JSONParser.parse(bytes, maximumDepth: limits.maximumDepth)
        } catch {
            throw RequestError(id: nil, op: nil, error: error)
        }
    }

    /// `OP [COLLECTION] [JSON-OBJECT]`: the op and collection become members of the object.
    private func inlineObject(_ bytes: ArraySlice<UInt8>) throws(RequestError) -> [JSONValue.Member] {
        var rest = bytes
        func nextToken() -> ArraySlice<UInt8> {
            let end = rest.firstIndex { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") } ?? rest.endIndex
            let token = rest[rest.startIndex..<end]
            rest = rest[end...].drop { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
            return token
        }
        let opToken = nextToken()
        guard let op = String(validating: opToken, as: UTF8.self),
            !op.isEmpty, op.utf8.allSatisfy({ $0 == UInt8(ascii: "_") || ($0 >= 0x61 && $0 <= 0x7a) })
        else {
            throw RequestError(
                id: nil, op: nil,
                error: .parseError("neither a JSON object nor an inline 'OP [COLLECTION] [JSON]' line"))
        }
        var members: [JSONValue.Member] = [.init("op", .string(op))]
        if let first = rest.first, first != UInt8(ascii: "{") {
            let nameToken = nextToken()
            guard let name = String(validating: nameToken, as: UTF8.self) else {
                throw RequestError(id: nil, op: op, error: .invalidName(String(decoding: nameToken, as: UTF8.self)))
            }
            members.append(.init("collection", .string(name)))
        }
        if !rest.isEmpty {
            guard rest.first == UInt8(ascii: "{") else {
                throw RequestError(id: nil, op: op, error: .parseError("inline arguments must be one JSON object"))
            }
            let value: JSONValue
            do {
                value = try JSONParser.parse(rest, maximumDepth: limits.maximumDepth)
            } catch {
                throw RequestError(id: nil, op: op, error: error)
            }
            guard case .object(let arguments) = value else {
                throw RequestError(id: nil, op: op, error: .parseError("inline arguments must be one JSON object"))
            }
            for argument in arguments where members.contains(where: { UTF8Bytes.equal($0.key, argument.key) }) {
                throw RequestError(
                    id: nil, op: op, error: .parseError("duplicate key '\(argument.key)': already given inline"))
            }
            members.append(contentsOf: arguments)
        }
        return members
    }
}

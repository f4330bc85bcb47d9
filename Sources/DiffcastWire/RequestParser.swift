import DiffcastCore

/// Turns one request line (without its `\n`) into a `Request`: either a JSON object, or the
/// inline form `OP [COLLECTION] [JSON-OBJECT]` of SPEC.md.
public struct RequestParser: Sendable {
    public var limits: RequestLimits
    /// Whether each request keeps a copy of its line (`Request.line`), which journaling a write
    /// or forwarding it to the backbone needs. A daemon with neither parses without the copy.
    public var keepsLines: Bool

    public init(limits: RequestLimits = RequestLimits(), keepsLines: Bool = true) {
        self.limits = limits
        self.keepsLines = keepsLines
    }

    /// Memory a parser's caller lends it from one line to the next: the token list, which would
    /// otherwise be allocated and freed for every request. One
    /// per thread, as the loop keeps its own.
    public struct Workspace {
        var tokens: [JSONToken] = []

        public init() {}

        /// Past this much room (a line of a few hundred KB) the list is let go after its line,
        /// not kept for the next.
        static let keptTokenCapacity = 16 * 1024

        /// Lends the token list, empty, to `body`; after it the list is emptied and kept.
        mutating func withTokens<Result, Failure: Error>(
            _ body: (inout [JSONToken]) throws(Failure) -> Result
        ) throws(Failure) -> Result {
            defer {
                if tokens.capacity > Self.keptTokenCapacity {
                    tokens = []
                } else {
                    tokens.removeAll(keepingCapacity: true)
                }
            }
            return try body(&tokens)
        }
    }

    public func parse(line: some Collection<UInt8>) throws(RequestError) -> Request {
        var workspace = Workspace()
        let parsed = line.withContiguousStorageIfAvailable { bytes in
            Result { () throws(RequestError) in try parse(bytes, reusing: &workspace) }
        }
        if let parsed { return try parsed.get() }
        return try Array(line).withUnsafeBufferPointer { bytes throws(RequestError) in
            try parse(bytes, reusing: &workspace)
        }
    }

    /// `parse(line:)` on bytes that stay valid only during the call (the loop's read buffer),
    /// with the caller's workspace.
    public func parse(
        _ bytes: UnsafeBufferPointer<UInt8>, reusing workspace: inout Workspace
    ) throws(RequestError) -> Request {
        var line = bytes
        if line.last == UInt8(ascii: "\r") { line = UnsafeBufferPointer(rebasing: line.dropLast()) }
        let compact = workspace.withTokens { tokens in
            CompactAppendReader.request(from: line, limits: limits, tokens: &tokens)
        }
        var request: Request
        if let compact {
            request = compact
        } else {
            request = try decodeInGeneral(line, &workspace)
        }
        request.record(line: line, keep: keepsLines)
        return request
    }

    /// Any request line, read through the token list (`JSONParser`) or the inline form.
    func decodeInGeneral(_ line: UnsafeBufferPointer<UInt8>, _ workspace: inout Workspace) throws(RequestError)
        -> Request
    {
        let start = line.firstIndex { $0 != UInt8(ascii: " ") && $0 != UInt8(ascii: "\t") } ?? line.count
        if start < line.count, line[start] == UInt8(ascii: "{") || line[start] == UInt8(ascii: "[") {
            return try decode(json: UnsafeBufferPointer(rebasing: line[start...]), &workspace)
        }
        // The inline form is for people at a terminal: its members are written out as the
        // object they stand for and read like any request.
        var object = JSONOutput()
        object.append(.object(try inlineObject(Array(line[start...])[...])))
        return try object.bytes.withUnsafeBufferPointer { json throws(RequestError) in
            try decode(json: json, &workspace)
        }
    }

    private func decode(json: UnsafeBufferPointer<UInt8>, _ workspace: inout Workspace) throws(RequestError)
        -> Request
    {
        try workspace.withTokens { tokens throws(RequestError) in
            try decode(json: json, tokens: &tokens)
        }
    }

    private func decode(json: UnsafeBufferPointer<UInt8>, tokens: inout [JSONToken]) throws(RequestError) -> Request {
        try JSONParser.withView(
            of: json, maximumDepth: limits.maximumDepth, reusing: &tokens,
            parseFailure: { RequestError(id: nil, op: nil, error: $0) }
        ) { root throws(RequestError) in
            guard root.isObject else {
                throw RequestError(id: nil, op: nil, error: .parseError("a request must be a JSON object"))
            }
            return try RequestDecoder(object: root, limits: limits).decode()
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
        // A word of letters, digits, `_` and `-` is taken as an op, so that a mistyped one
        // (`APPLY`) is answered as an unknown op with a suggestion.
        guard let op = String(validating: opToken, as: UTF8.self), !op.isEmpty,
            op.utf8.allSatisfy({
                $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-") || (0x30...0x39).contains($0)
                    || (0x41...0x5a).contains($0) || (0x61...0x7a).contains($0)
            })
        else {
            throw RequestError(
                id: nil, op: nil,
                error: .parseError("neither a JSON object nor an inline 'OP [COLLECTION] [JSON]' line"))
        }
        var members: [JSONValue.Member] = [.init("op", .string(op))]
        if op == "auth", let first = rest.first, first != UInt8(ascii: "{") {
            // `auth TOKEN`: the word is the token (auth names no collection).
            members.append(.init("token", .string(String(decoding: nextToken(), as: UTF8.self))))
        } else if let first = rest.first, first != UInt8(ascii: "{") {
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

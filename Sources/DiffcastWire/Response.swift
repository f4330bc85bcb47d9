import DiffcastCore

/// The answer to one request as a value (SPEC.md "Responses"): what succeeded and what it
/// carries, or the error that names the culprit. `WireEncoder.encode` writes it;
/// `ResponseDecoder` reads the answers one daemon relays from another.
public struct Response: Sendable {
    public var id: JSONText?
    public var op: String?
    public var result: Result<Answer, DiffcastError>

    public init(id: JSONText?, op: String?, result: Result<Answer, DiffcastError>) {
        self.id = id
        self.op = op
        self.result = result
    }

    public static func success(id: JSONText?, op: String, _ answer: Answer = .done) -> Response {
        Response(id: id, op: op, result: .success(answer))
    }

    public static func failure(id: JSONText?, op: String?, _ error: DiffcastError) -> Response {
        Response(id: id, op: op, result: .failure(error))
    }

    public var isSuccess: Bool {
        if case .success = result { true } else { false }
    }

    /// The version a successful write, `window` op or subscription names.
    public var version: UInt64? {
        switch result {
        case .success(.version(let version)), .success(.subscribed(_, _, let version)),
            .success(.state(_, _, let version, _, _)):
            version
        default: nil
        }
    }
}

/// What a successful response carries besides its id and op.
public enum Answer: Sendable {
    /// Nothing more (ping, auth, drop, unsubscribe).
    case done
    /// The version a write (or the `window` op) is visible from.
    case version(UInt64)
    /// `get`: the collection at `version`, or with `window` the view of it that a window shows.
    /// The rare answers are boxed (`indirect`), so that the common ones, which every write's
    /// acknowledgement carries, stay small in every outcome.
    indirect case state(collection: String, epoch: String, version: UInt64, Snapshot, window: WindowPlace?)
    /// `subscribe`: the version the subscription starts at.
    case subscribed(collection: String, epoch: String, version: UInt64)
    /// `list`: every collection.
    indirect case collections([CollectionRow])
    /// `stats`.
    indirect case statistics(StatisticsReport)
}

extension WireEncoder {
    /// The response line.
    public static func encode(_ response: Response) -> [UInt8] {
        switch response.result {
        case .failure(let error):
            return failure(id: response.id, op: response.op, error: error)
        case .success(.done):
            return success(id: response.id, op: response.op)
        case .success(.version(let version)):
            return success(id: response.id, op: response.op) { output in
                output.appendRaw(",\"version\":")
                output.append(version)
            }
        case .success(.state(let name, let epoch, let version, let snapshot, let window)):
            return success(id: response.id, op: response.op) { output in
                output.appendRaw(",\"collection\":")
                output.append(string: name)
                appendState(of: snapshot, version: version, epoch: epoch, into: &output)
                if let window { appendWindow(window, into: &output) }
            }
        case .success(.collections(let rows)):
            return success(id: response.id, op: response.op) { output in appendCollections(rows, into: &output) }
        case .success(.statistics(let report)):
            return success(id: response.id, op: response.op) { output in appendStatistics(report, into: &output) }
        case .success(.subscribed(let name, let epoch, let version)):
            return success(id: response.id, op: response.op) { output in
                output.appendRaw(",\"collection\":")
                output.append(string: name)
                output.appendRaw(",\"epoch\":")
                output.append(string: epoch)
                output.appendRaw(",\"version\":")
                output.append(version)
            }
        }
    }
}

/// Reads the answers to writes, drops and subscriptions that a daemon relays from another:
/// whether each succeeded, and the version it names. A `get`'s answer, which the relaying daemon
/// passes on as it came, is refused here rather than read half.
public enum ResponseDecoder {
    /// `maximumDepth`: the depth requests may have, since an answer echoes its request's `id`.
    public static func response(
        _ line: [UInt8], maximumDepth: Int = JSONParser.defaultMaximumDepth
    ) throws(Malformed) -> Response {
        let value: JSONValue
        do {
            value = try JSONParser.parse(line, maximumDepth: maximumDepth)
        } catch {
            throw Malformed(description: "not a response: \(error.message)")
        }
        let id = value["id"].map { JSONText(canonical: $0.canonicalText) }
        let op: String? = if case .string(let text) = value["op"] { text } else { nil }
        switch value["ok"] {
        case .bool(false):
            guard case .string(let code) = value["error"]?["code"],
                case .string(let message) = value["error"]?["message"]
            else { throw Malformed(description: "a failure without an error code and message") }
            return .failure(id: id, op: op, .relayed(code: code, message: message))
        case .bool(true):
            guard value["sections"] == nil else { throw Malformed(description: "a state answer is not read here") }
            guard let versionValue = value["version"] else { return Response(id: id, op: op, result: .success(.done)) }
            let version = try EventDecoder.version(versionValue)
            if case .string(let name) = value["collection"], case .string(let epoch) = value["epoch"] {
                return Response(
                    id: id, op: op, result: .success(.subscribed(collection: name, epoch: epoch, version: version)))
            }
            return Response(id: id, op: op, result: .success(.version(version)))
        default:
            throw Malformed(description: "a response without \"ok\"")
        }
    }
}

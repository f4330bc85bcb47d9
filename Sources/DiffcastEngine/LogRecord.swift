import DiffcastWire

/// One entry of the write-ahead log: enough to redo, in order, everything that was acknowledged.
public enum LogRecord: Sendable, Equatable {
    /// A collection came into existence with this epoch.
    case create(collection: String, epoch: String)
    /// Writes applied together, leaving the collection at `version`; each is its request line.
    case batch(collection: String, version: UInt64, writes: [[UInt8]])
    case drop(collection: String)

    /// The collection the record is about.
    public var collection: String {
        switch self {
        case .create(let name, _), .batch(let name, _, _), .drop(let name): name
        }
    }

    /// The record as compact JSON.
    var payload: [UInt8] {
        var output = JSONOutput()
        switch self {
        case .create(let name, let epoch):
            output.appendRaw("{\"t\":\"create\",\"c\":")
            output.append(string: name)
            output.appendRaw(",\"e\":")
            output.append(string: epoch)
        case .batch(let name, let version, let writes):
            output.appendRaw("{\"t\":\"batch\",\"c\":")
            output.append(string: name)
            output.appendRaw(",\"v\":")
            output.append(version)
            output.appendRaw(",\"w\":[")
            for (index, line) in writes.enumerated() {
                if index > 0 { output.appendByte(UInt8(ascii: ",")) }
                output.append(string: String(decoding: line, as: UTF8.self))
            }
            output.appendByte(UInt8(ascii: "]"))
        case .drop(let name):
            output.appendRaw("{\"t\":\"drop\",\"c\":")
            output.append(string: name)
        }
        output.appendByte(UInt8(ascii: "}"))
        return output.bytes
    }

    init?(_ value: JSONValue) {
        guard case .string(let kind) = value["t"], case .string(let name) = value["c"] else { return nil }
        switch kind {
        case "create":
            guard case .string(let epoch) = value["e"] else { return nil }
            self = .create(collection: name, epoch: epoch)
        case "batch":
            guard case .number(let text) = value["v"], let version = UInt64(counter: text),
                case .array(let lines) = value["w"]
            else { return nil }
            var writes: [[UInt8]] = []
            for line in lines {
                guard case .string(let text) = line else { return nil }
                writes.append(Array(text.utf8))
            }
            self = .batch(collection: name, version: version, writes: writes)
        case "drop":
            self = .drop(collection: name)
        default:
            return nil
        }
    }

    /// The records of one apply-queue batch as one log payload (a JSON array), so that the log
    /// holds a batch whole or not at all.
    public static func payload(of records: [LogRecord]) -> [UInt8] {
        var bytes: [UInt8] = [UInt8(ascii: "[")]
        for (index, record) in records.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            bytes.append(contentsOf: record.payload)
        }
        bytes.append(UInt8(ascii: "]"))
        return bytes
    }

    /// The records of one log payload, or nil when it is not one.
    public static func records(inPayload payload: [UInt8]) -> [LogRecord]? {
        guard let value = try? JSONParser.parse(payload, maximumDepth: 1024), case .array(let elements) = value
        else { return nil }
        var records: [LogRecord] = []
        for element in elements {
            guard let record = LogRecord(element) else { return nil }
            records.append(record)
        }
        return records
    }
}

extension UInt64 {
    /// A version, log sequence or generation read from a file or the shared log: at most
    /// 2^63 − 1, so that counting on from it can never overflow (no daemon counts that far; a
    /// larger one is damage, or someone else's message). The fuzz targets found each place where
    /// 2^64 − 1 trapped the next write or the recovery.
    package init?(counter text: String) {
        guard let value = UInt64(text), value <= UInt64(Int64.max) else { return nil }
        self = value
    }
}

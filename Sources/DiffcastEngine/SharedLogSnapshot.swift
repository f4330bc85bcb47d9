import DiffcastCore
import DiffcastWire

/// A collection's whole state at one message of the shared log, so that the messages up to it
/// can be cut from the log and a daemon that starts does not replay them:
///
///     {"name":…,"log":SEQUENCE,"epoch":…,"version":…,"sections":[…],"digest":…}
///
/// The digest is checked when it is read, as a checkpoint's is.
public struct SharedLogSnapshot: Sendable {
    public var name: String
    public var epoch: String
    public var version: UInt64
    /// The log sequence of the message that brought `version`.
    public var logSequence: UInt64
    public var sections: [SectionOutline]

    static func encode(
        name: String, epoch: String, version: UInt64, logSequence: UInt64, snapshot: Snapshot
    ) -> [UInt8] {
        var output = JSONOutput(reservingCapacity: 1 << 12)
        output.appendRaw("{\"name\":")
        output.append(string: name)
        output.appendRaw(",\"log\":")
        output.append(logSequence)
        WireEncoder.appendState(of: snapshot, version: version, epoch: epoch, into: &output)
        output.appendByte(UInt8(ascii: "}"))
        return output.bytes
    }

    /// Nil when the bytes are not a snapshot or its digest does not match its sections.
    init?(decoding bytes: [UInt8]) {
        guard let value = try? JSONParser.parse(bytes, maximumDepth: 1024), case .string(let name) = value["name"],
            case .number(let logText) = value["log"], let logSequence = UInt64(counter: logText),
            case .string(let epoch) = value["epoch"], case .number(let versionText) = value["version"],
            let version = UInt64(counter: versionText), let sections = try? EventDecoder.outline(value["sections"]),
            case .string(let digest) = value["digest"], digest == Digest(of: sections).description
        else { return nil }
        self.name = name
        self.epoch = epoch
        self.version = version
        self.logSequence = logSequence
        self.sections = sections
    }
}

/// Every error the daemon can answer with, one case per SPEC.md error code, each carrying the
/// culprit its message names.
public indirect enum DiffcastError: Error, Hashable, Sendable {
    case parseError(String)
    case lineTooLong(limit: Int)
    /// An op that does not exist, with the op it most likely meant.
    case unknownOperation(String, didYouMean: String? = nil)
    case invalidArgument(String)
    case invalidName(String)
    case duplicateIdentifier(kind: IdentifierKind, id: Identifier)
    case unknownCollection(String)
    case unknownSection(Identifier)
    case unknownItem(Identifier)
    case noSection
    case limitExceeded(String)
    case unauthorized(String)
    /// The write could not be made durable (disk full, I/O error): it was not applied.
    case unavailable(String)
    /// Entry `entry` (from 0) of a `batch` failed with `error`; the message names it `ops[K]`.
    case inBatch(entry: Int, DiffcastError)
    /// A write to a collection that does not exist failed with `error`: its message says so, as
    /// the likely cause is a mistyped collection name.
    case inMissingCollection(String, DiffcastError)
    /// An error another daemon answered (a forwarded write's), with its code and message as it
    /// sent them.
    case relayed(code: String, message: String)

    /// Whether an identifier names a section or an item.
    public enum IdentifierKind: String, Sendable {
        case section
        case item
    }

    /// The SPEC.md error code.
    public var code: String {
        switch self {
        case .parseError: "parse_error"
        case .lineTooLong: "line_too_long"
        case .unknownOperation: "unknown_op"
        case .invalidArgument: "invalid_argument"
        case .invalidName: "invalid_name"
        case .duplicateIdentifier: "duplicate_identifier"
        case .unknownCollection: "unknown_collection"
        case .unknownSection: "unknown_section"
        case .unknownItem: "unknown_item"
        case .noSection: "no_section"
        case .limitExceeded: "limit_exceeded"
        case .unauthorized: "unauthorized"
        case .unavailable: "unavailable"
        case .inBatch(_, let error), .inMissingCollection(_, let error): error.code
        case .relayed(let code, _): code
        }
    }

    /// A sentence for people, naming the offending identifier, argument or limit.
    public var message: String {
        switch self {
        case .parseError(let detail): "not a request: \(detail)"
        case .lineTooLong(let limit): "line longer than the limit of \(limit) bytes; skipped"
        case .unknownOperation(let op, let suggestion?): "unknown op '\(op)'; did you mean '\(suggestion)'?"
        case .unknownOperation(let op, nil): "unknown op '\(op)'"
        case .invalidArgument(let detail): detail
        case .invalidName(let name): "invalid collection name '\(name)': 1-128 bytes of [A-Za-z0-9._:-]"
        case .duplicateIdentifier(let kind, let id): "duplicate \(kind.rawValue) identifier '\(id)'"
        case .unknownCollection(let name): "unknown collection '\(name)'"
        case .unknownSection(let id): "unknown section '\(id)'"
        case .unknownItem(let id): "unknown item '\(id)'"
        case .noSection: "append_items without 'section' needs at least one section to append to"
        case .limitExceeded(let detail): "limit exceeded: \(detail)"
        case .unauthorized(let detail): "unauthorized: \(detail)"
        case .unavailable(let detail): "unavailable: \(detail)"
        case .inBatch(let entry, let error): "ops[\(entry)]: \(error.message)"
        case .inMissingCollection(let name, let error):
            "\(error.message) (collection '\(name)' does not exist: is its name mistyped?)"
        case .relayed(_, let message): message
        }
    }
}

import DiffcastCore
import Foundation
import Logging

/// A log handler to stderr whose level a reload can change while the daemon runs.
///
/// Under systemd, when `$JOURNAL_STREAM` names the device and inode of stderr, every line starts
/// with a `<N>` syslog priority, so journald files warnings and errors at their level
/// (`journalctl -p warning` finds them) and adds its own timestamp. Elsewhere lines carry a
/// timestamp and the level in words.
public struct ReloadableLogHandler: LogHandler {
    /// The level every handler made by `bootstrap` reads.
    public static let level = Locked<Logger.Level>(.info)

    /// Whether stderr is a journald stream (decided once per process).
    public static let writesToJournal: Bool = {
        guard let stream = ProcessInfo.processInfo.environment["JOURNAL_STREAM"] else { return false }
        var status = stat()
        guard fstat(STDERR_FILENO, &status) == 0 else { return false }
        return stream == "\(status.st_dev):\(status.st_ino)"
    }()

    private let label: String
    public var metadata: Logger.Metadata = [:]

    public init(label: String) {
        self.label = label
    }

    public var logLevel: Logger.Level {
        get { Self.level.withLock { $0 } }
        set { Self.level.withLock { $0 = newValue } }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        let line = Self.format(event, label: label, handlerMetadata: metadata, forJournal: Self.writesToJournal)
        FileHandle.standardError.write(Data(line.utf8))
    }

    /// One log line, ending in a newline.
    static func format(
        _ event: LogEvent, label: String, handlerMetadata: Logger.Metadata, forJournal: Bool
    ) -> String {
        let merged = handlerMetadata.merging(event.metadata ?? [:]) { $1 }
        let fields = merged.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        let text = fields.isEmpty ? "\(event.message)" : "\(event.message) \(fields)"
        if forJournal {
            return "<\(syslogPriority(event.level))>\(text)\n"
        }
        let time = ISO8601DateFormatter.string(
            from: Date(), timeZone: TimeZone(identifier: "UTC") ?? .current, formatOptions: [.withInternetDateTime])
        return "\(time) \(event.level) \(label): \(text)\n"
    }

    /// The syslog priority journald reads from a `<N>` prefix.
    static func syslogPriority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }
}

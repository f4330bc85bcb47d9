import Logging
import Synchronization

/// A log handler to stderr whose level a reload can change while the daemon runs.
public struct ReloadableLogHandler: LogHandler {
    /// The level every handler made by `bootstrap` reads.
    public static let level = Mutex<Logger.Level>(.info)

    private var stream: StreamLogHandler

    public init(label: String) {
        stream = StreamLogHandler.standardError(label: label)
    }

    public var logLevel: Logger.Level {
        get { Self.level.withLock { $0 } }
        set { Self.level.withLock { $0 = newValue } }
    }

    public var metadata: Logger.Metadata {
        get { stream.metadata }
        set { stream.metadata = newValue }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { stream[metadataKey: key] }
        set { stream[metadataKey: key] = newValue }
    }

    public func log(event: LogEvent) {
        stream.log(event: event)
    }
}

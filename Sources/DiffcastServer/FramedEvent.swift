import DiffcastEngine
import DiffcastHTTP
import DiffcastWire

/// One event line and the bytes each transport sends it as, built the first time a subscriber
/// of that transport needs them and then shared: a fan-out to a thousand Server-Sent Events or
/// WebSocket subscribers frames the event once, not once per subscriber, and each subscriber's
/// write takes one buffer. Used on the loop thread only.
final class FramedEvent {
    let line: SharedBytes
    /// Frames for every connection alike: a server's text frame depends on nothing of the
    /// connection (it is not masked, and no extension is negotiated).
    private let webSocketFramer: WebSocketCodec
    private var serverSentEvent: SharedBytes?
    private var webSocketFrame: SharedBytes?
    private var compactServerSentEvent: SharedBytes?
    private var compactWebSocketFrame: SharedBytes?

    init(_ line: SharedBytes, webSocketFramer: WebSocketCodec) {
        self.line = line
        self.webSocketFramer = webSocketFramer
    }

    /// `id:`, `event:` and `data:` lines, then the blank line that ends the event.
    var asServerSentEvent: SharedBytes {
        if let serverSentEvent { return serverSentEvent }
        let framed = Self.serverSentEvent(line.withUnsafeBytes(ServerSentEvents.prefix), data: line.bytes)
        serverSentEvent = framed
        return framed
    }

    /// One text frame holding the line, its newline left out.
    var asWebSocketFrame: SharedBytes {
        if let webSocketFrame { return webSocketFrame }
        let framed = SharedBytes(line.withUnsafeBytes(webSocketFramer.frame))
        webSocketFrame = framed
        return framed
    }

    /// For a compact stream: a changeset without its collection, epoch and `from`
    /// (`CompactEvents`), after its `id:` line and without an `event:` line (its data says
    /// `"event":"changeset"`); any other event as `asServerSentEvent`.
    var asCompactServerSentEvent: SharedBytes {
        if let compactServerSentEvent { return compactServerSentEvent }
        let framed =
            line.withUnsafeBytes { line in
                CompactEvents.changeset(line, keepingCollection: false).map {
                    Self.serverSentEvent(ServerSentEvents.prefix(of: line, namingKind: false), data: $0)
                }
            } ?? asServerSentEvent
        compactServerSentEvent = framed
        return framed
    }

    /// For a compact WebSocket: a changeset without its epoch and `from` (`CompactEvents`; the
    /// collection stays, as a WebSocket carries several subscriptions) in one text frame; any
    /// other event as `asWebSocketFrame`.
    var asCompactWebSocketFrame: SharedBytes {
        if let compactWebSocketFrame { return compactWebSocketFrame }
        let framed =
            line.withUnsafeBytes { CompactEvents.changeset($0, keepingCollection: true) }.map {
                SharedBytes($0.withUnsafeBytes(webSocketFramer.frame))
            } ?? asWebSocketFrame
        compactWebSocketFrame = framed
        return framed
    }

    /// An event's `prefix` (`ServerSentEvents.prefix`), its line as the data (with its
    /// newline), and the blank line that ends it.
    private static func serverSentEvent(_ prefix: [UInt8], data: [UInt8]) -> SharedBytes {
        var bytes = prefix
        bytes.reserveCapacity(bytes.count + data.count + 1)
        bytes += data
        bytes.append(UInt8(ascii: "\n"))
        return SharedBytes(bytes)
    }
}

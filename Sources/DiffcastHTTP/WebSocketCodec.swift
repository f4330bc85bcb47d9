import CHTTP

/// One WebSocket connection's framing (RFC 6455), server side, by wslay: bytes from the peer in,
/// text messages out; lines to send in, frames out. Control frames (ping, close) are answered by
/// wslay; the bytes it wants to send come back from `feed`. It knows nothing of sockets.
public final class WebSocketCodec {
    /// What one `feed` produced.
    public struct Received {
        /// Complete text messages, in order.
        public var messages: [[UInt8]] = []
        /// Bytes to send to the peer (pongs, the closing handshake).
        public var reply: [UInt8] = []
        /// The connection is finished: close it once `reply` is written.
        public var isFinished = false
    }

    private var context: OpaquePointer?
    private var input: [UInt8] = []
    private var inputOffset = 0
    private var output: [UInt8] = []
    private var messages: [[UInt8]] = []

    /// `maximumMessageBytes` bounds a message from the peer (a longer one closes the
    /// connection with 1009, "message too big").
    public init(maximumMessageBytes: Int) {
        var callbacks = wslay_event_callbacks()
        callbacks.recv_callback = { context, buffer, length, _, user in
            guard let user, let buffer else { return -1 }
            let codec = Unmanaged<WebSocketCodec>.fromOpaque(user).takeUnretainedValue()
            let available = codec.input.count - codec.inputOffset
            guard available > 0 else {
                wslay_event_set_error(context, Int32(WSLAY_ERR_WOULDBLOCK.rawValue))
                return -1
            }
            let count = Swift.min(available, length)
            codec.input.withUnsafeBytes { bytes in
                guard let base = bytes.baseAddress else { return }
                UnsafeMutableRawPointer(buffer).copyMemory(from: base + codec.inputOffset, byteCount: count)
            }
            codec.inputOffset += count
            return count
        }
        callbacks.send_callback = { _, data, length, _, user in
            guard let user, let data else { return -1 }
            let codec = Unmanaged<WebSocketCodec>.fromOpaque(user).takeUnretainedValue()
            codec.output.append(contentsOf: UnsafeRawBufferPointer(start: data, count: length))
            return length
        }
        callbacks.on_msg_recv_callback = { _, message, user in
            guard let user, let message, message.pointee.opcode == UInt8(WSLAY_TEXT_FRAME.rawValue) else { return }
            let codec = Unmanaged<WebSocketCodec>.fromOpaque(user).takeUnretainedValue()
            let length = message.pointee.msg_length
            codec.messages.append(
                length == 0 ? [] : Array(UnsafeBufferPointer(start: message.pointee.msg, count: length)))
        }
        let user = Unmanaged.passUnretained(self).toOpaque()
        if wslay_event_context_server_init(&context, &callbacks, user) == 0 {
            wslay_event_config_set_max_recv_msg_length(context, UInt64(maximumMessageBytes))
        }
    }

    deinit {
        if let context { wslay_event_context_free(context) }
    }

    /// Reads what the peer sent.
    public func feed(_ bytes: UnsafeRawBufferPointer) -> Received {
        guard let context else { return Received(isFinished: true) }
        if inputOffset == input.count {
            input = []
            inputOffset = 0
        }
        input.append(contentsOf: bytes)
        let failed = wslay_event_recv(context) != 0
        _ = wslay_event_send(context)
        var received = Received(messages: messages, reply: output)
        messages = []
        output = []
        received.isFinished =
            failed || (wslay_event_want_read(context) == 0 && wslay_event_want_write(context) == 0)
        return received
    }

    /// Whether a message may still be sent: not once the closing handshake began.
    public var maySend: Bool {
        guard let context else { return false }
        return wslay_event_get_close_sent(context) == 0
    }

    /// One text frame holding `line` (its final newline left out); empty once the connection is
    /// closing.
    public func frame(_ line: UnsafeRawBufferPointer) -> [UInt8] {
        guard let context, let start = line.baseAddress else { return [] }
        let length = line.last == UInt8(ascii: "\n") ? line.count - 1 : line.count
        var message = wslay_event_msg(
            opcode: UInt8(WSLAY_TEXT_FRAME.rawValue), msg: start.assumingMemoryBound(to: UInt8.self),
            msg_length: length)
        guard wslay_event_queue_msg(context, &message) == 0 else { return [] }
        _ = wslay_event_send(context)
        defer { output = [] }
        return output
    }

    /// The handshake's answer header: Sec-WebSocket-Accept for the client's Sec-WebSocket-Key.
    public static func acceptValue(forKey key: String) -> String {
        var accept = [CChar](repeating: 0, count: 29)
        key.withCString { dc_websocket_accept($0, strlen($0), &accept) }
        return String(decoding: accept.prefix(28).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

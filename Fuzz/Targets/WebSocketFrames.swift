import DiffcastHTTP

extension FuzzTargets {
    /// Bytes from a WebSocket client after the handshake, as the front end reads them: fed to
    /// `WebSocketCodec` in pieces, then a line framed back. Oracles: nothing traps; no message
    /// longer than the limit comes out; once finished, it stays finished.
    public static func webSocketFrames(_ input: UnsafeRawBufferPointer) {
        var bytes = Array(input)
        let cut = bytes.isEmpty ? 1 : Int(bytes.removeFirst() % 32) + 1
        let codec = WebSocketCodec(maximumMessageBytes: 128)
        var finished = false
        var start = 0
        while start < bytes.count {
            let end = min(start + cut, bytes.count)
            let received = bytes[start..<end].withUnsafeBytes { codec.feed($0) }
            if received.messages.contains(where: { $0.count > 128 }) { Fuzz.failure("a message past the limit") }
            if finished && !received.messages.isEmpty { Fuzz.failure("a message after the end") }
            finished = finished || received.isFinished
            start = end
        }
        _ = Array("{\"ok\":true}\n".utf8).withUnsafeBytes { codec.frame($0) }
    }
}

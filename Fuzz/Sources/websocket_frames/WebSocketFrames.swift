import DiffcastHTTP
import FuzzSupport

/// Bytes from a WebSocket client after the handshake, as the front end reads them: fed to
/// `WebSocketCodec` in pieces, then a line framed back. Oracles: nothing traps; no message
/// longer than the limit comes out; once finished, it stays finished.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var bytes = Fuzz.bytes(data, size)
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
    return 0
}

@main enum Main {
    static func main() { Fuzz.main { data, size in fuzz(data!, size) } }
}

import CLibUV
import Glibc

/// Serves `GET /metrics` (Prometheus text) over plain HTTP/1.1 on the loop thread: one request
/// per connection, answered and closed. It knows nothing of collections; `Server` says what the
/// gauges read at scrape time.
final class MetricsEndpoint {
    /// A scrape connection: the bytes of its request so far.
    private final class Scrape {
        let endpoint: MetricsEndpoint
        var request: [UInt8] = []
        /// Kept until the connection closes: the write reads these bytes.
        var response: SharedBytes?
        var buffer: uv_buf_t = uv_buf_t()

        init(endpoint: MetricsEndpoint) {
            self.endpoint = endpoint
        }
    }

    /// Longest request head read before answering 431.
    private static let maximumRequestBytes = 8192
    let metrics: ServerMetrics
    /// Sets the gauges that are read from the loop's state, just before a scrape is answered.
    let refreshGauges: () -> Void

    init(metrics: ServerMetrics, refreshGauges: @escaping () -> Void) {
        self.metrics = metrics
        self.refreshGauges = refreshGauges
    }

    /// Takes an accepted TCP client of the metrics listener.
    func accept(_ client: UnsafeMutableRawPointer) {
        let scrape = Scrape(endpoint: self)
        dc_handle(client).pointee.data = Unmanaged.passRetained(scrape).toOpaque()
        uv_read_start(
            dc_stream(client),
            { handle, suggested, buffer in
                guard let handle, let buffer, let scrape = MetricsEndpoint.scrape(of: handle) else { return }
                let size = min(suggested, 4096)
                scrape.buffer = uv_buf_init(
                    UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 1).assumingMemoryBound(
                        to: CChar.self), UInt32(size))
                buffer.pointee = scrape.buffer
            },
            { stream, count, buffer in
                guard let stream, let scrape = MetricsEndpoint.scrape(of: stream) else { return }
                defer { buffer?.pointee.base.map { UnsafeMutableRawPointer($0).deallocate() } }
                if count < 0 {
                    MetricsEndpoint.close(stream)
                    return
                }
                if count > 0, let base = buffer?.pointee.base {
                    scrape.request.append(
                        contentsOf: UnsafeRawBufferPointer(start: UnsafeRawPointer(base), count: count))
                }
                scrape.endpoint.didRead(stream, scrape)
            })
    }

    private static func scrape(of handle: UnsafeMutableRawPointer) -> Scrape? {
        guard let data = dc_handle(handle).pointee.data else { return nil }
        return Unmanaged<Scrape>.fromOpaque(data).takeUnretainedValue()
    }

    private func didRead(_ stream: UnsafeMutablePointer<uv_stream_t>, _ scrape: Scrape) {
        let headEnd = Array("\r\n\r\n".utf8)
        let complete =
            scrape.request.count >= 4
            && (0...(scrape.request.count - 4)).contains { scrape.request[$0..<($0 + 4)].elementsEqual(headEnd) }
        guard complete || scrape.request.count > Self.maximumRequestBytes else { return }
        uv_read_stop(stream)
        let line = String(decoding: scrape.request.prefix { $0 != UInt8(ascii: "\r") }, as: UTF8.self)
        let response: SharedBytes
        if !complete {
            response = Self.response(status: "431 Request Header Fields Too Large", body: [])
        } else if line.hasPrefix("GET /metrics ") || line == "GET /metrics" {
            refreshGauges()
            response = Self.response(status: "200 OK", body: metrics.exposition())
        } else {
            response = Self.response(status: "404 Not Found", body: Array("try GET /metrics\n".utf8))
        }
        scrape.response = response
        let request = UnsafeMutablePointer<uv_write_t>.allocate(capacity: 1)
        request.initialize(to: uv_write_t())
        var buffer = uv_buf_init(response.pointer.assumingMemoryBound(to: CChar.self), UInt32(response.count))
        let result = uv_write(request, stream, &buffer, 1) { request, _ in
            guard let request else { return }
            let stream = request.pointee.handle
            request.deallocate()
            if let stream { MetricsEndpoint.close(stream) }
        }
        if result != 0 {
            request.deallocate()
            Self.close(stream)
        }
    }

    private static func response(status: String, body: [UInt8]) -> SharedBytes {
        let head =
            "HTTP/1.1 \(status)\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
            + "Content-Length: \(body.count)\r\nConnection: close\r\n\r\n"
        return SharedBytes(Array(head.utf8) + body)
    }

    private static func close(_ stream: UnsafeMutablePointer<uv_stream_t>) {
        guard uv_is_closing(dc_handle(stream)) == 0 else { return }
        uv_close(dc_handle(stream)) { handle in
            guard let handle else { return }
            if let data = handle.pointee.data { Unmanaged<Scrape>.fromOpaque(data).release() }
            UnsafeMutableRawPointer(handle).deallocate()
        }
    }
}

/// An HTTP/1.1 response the front end writes whole.
public struct HTTPResponse: Equatable, Sendable {
    public var status: Int
    public var contentType: String
    public var body: [UInt8]
    /// More header lines (`Name: value`), e.g. `WWW-Authenticate`.
    public var headers: [String]
    /// An answer to `HEAD`: the head of the response `GET` would get, without its body.
    public var omitsBody: Bool

    public init(
        status: Int, contentType: String = "application/json", body: [UInt8], headers: [String] = [],
        omitsBody: Bool = false
    ) {
        self.status = status
        self.contentType = contentType
        self.body = body
        self.headers = headers
        self.omitsBody = omitsBody
    }

    /// A JSON error answer in the protocol's shape, for a refusal made before any request ran.
    public static func error(_ status: Int, code: String, _ message: String, headers: [String] = []) -> HTTPResponse {
        var output = Array(#"{"ok":false,"error":{"code":"#.utf8)
        output += JSONString.quoted(code) + Array(#","message":"#.utf8) + JSONString.quoted(message)
        output += Array("}}\n".utf8)
        return HTTPResponse(status: status, body: output, headers: headers)
    }

    /// The response's bytes: status line, headers, body.
    public func encoded(keepAlive: Bool, corsOrigin: String?) -> [UInt8] {
        var head = "HTTP/1.1 \(status) \(Self.reason(status))\r\n"
        head += "Content-Type: \(contentType)\r\nContent-Length: \(body.count)\r\n"
        head += keepAlive ? "" : "Connection: close\r\n"
        head += Self.corsHeaders(corsOrigin)
        for header in headers { head += header + "\r\n" }
        return Array((head + "\r\n").utf8) + (omitsBody ? [] : body)
    }

    /// The head of a response whose body follows as it is made (`Transfer-Encoding: chunked`),
    /// or streams until the connection closes (an event stream).
    public static func streamingHead(status: Int, contentType: String, chunked: Bool, corsOrigin: String?) -> [UInt8] {
        var head = "HTTP/1.1 \(status) \(reason(status))\r\nContent-Type: \(contentType)\r\n"
        // An event stream tells proxies not to buffer it (nginx holds a buffered response back
        // until the buffer fills: an SSE page would see nothing).
        head +=
            chunked
            ? "Transfer-Encoding: chunked\r\n"
            : "Cache-Control: no-cache\r\nConnection: keep-alive\r\nX-Accel-Buffering: no\r\n"
        head += corsHeaders(corsOrigin)
        return Array((head + "\r\n").utf8)
    }

    static func corsHeaders(_ origin: String?) -> String {
        guard let origin else { return "" }
        return "Access-Control-Allow-Origin: \(origin)\r\nVary: Origin\r\n"
    }

    static func reason(_ status: Int) -> String {
        switch status {
        case 101: "Switching Protocols"
        case 200: "OK"
        case 204: "No Content"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 409: "Conflict"
        case 413: "Content Too Large"
        case 426: "Upgrade Required"
        case 429: "Too Many Requests"
        case 431: "Request Header Fields Too Large"
        case 503: "Service Unavailable"
        default: "Status"
        }
    }

    /// The status that fits a protocol answer: 200 for `ok`, else by its error code.
    public static func status(ofAnswer line: UnsafeRawBufferPointer) -> Int {
        if line.starts(with: #"{"ok":true"#.utf8) { return 200 }
        let marker = Array(#""error":{"code":""#.utf8)
        guard line.count >= marker.count,
            let start = (0...(line.count - marker.count)).first(where: {
                line[$0..<($0 + marker.count)].elementsEqual(marker)
            })
        else { return 500 }
        let code = String(decoding: line[(start + marker.count)...].prefix { $0 != UInt8(ascii: "\"") }, as: UTF8.self)
        switch code {
        case "unauthorized": return 403
        case "unknown_collection", "unknown_section", "unknown_item": return 404
        case "duplicate_identifier", "no_section": return 409
        case "limit_exceeded", "line_too_long": return 413
        case "unavailable": return 503
        default: return 400
        }
    }
}

/// JSON string literals for the few messages the front end writes itself.
enum JSONString {
    static func quoted(_ text: String) -> [UInt8] {
        var output: [UInt8] = [UInt8(ascii: "\"")]
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"): output += [UInt8(ascii: "\\"), byte]
            case 0..<0x20: output += Array("\\u00".utf8) + Array(String(byte, radix: 16).leftPadded(to: 2).utf8)
            default: output.append(byte)
            }
        }
        return output + [UInt8(ascii: "\"")]
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        String(repeating: "0", count: Swift.max(0, width - count)) + self
    }
}

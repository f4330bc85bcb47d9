import CHTTP

/// One HTTP/1.1 request, whole: what the front end routes.
public struct HTTPRequest: Sendable {
    public var method: String
    /// The request target as sent: path and query.
    public var target: String
    /// Header fields in arrival order, names in lowercase.
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]
    /// Whether the connection stays open after the response (HTTP/1.1 keep-alive).
    public var keepAlive: Bool
    /// The request asks to switch protocols (a WebSocket handshake).
    public var isUpgrade: Bool

    public init(
        method: String, target: String, headers: [(name: String, value: String)] = [], body: [UInt8] = [],
        keepAlive: Bool = true, isUpgrade: Bool = false
    ) {
        self.method = method
        self.target = target
        self.headers = headers
        self.body = body
        self.keepAlive = keepAlive
        self.isUpgrade = isUpgrade
    }

    /// The first value of a header (give the name in lowercase).
    public func header(_ name: String) -> String? {
        headers.first { $0.name == name }?.value
    }

    /// The target's path, percent-decoding left to the router (a name may hold an encoded `/`).
    public var path: Substring { target.prefix { $0 != "?" } }

    /// The query's parameters, percent-decoded (`+` is a space); the first of each name counts.
    public var query: [String: String] {
        guard let mark = target.firstIndex(of: "?") else { return [:] }
        var parameters: [String: String] = [:]
        for pair in target[target.index(after: mark)...].split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = PercentDecoding.decode(parts[0], plusIsSpace: true), parameters[name] == nil else {
                continue
            }
            parameters[name] = parts.count > 1 ? PercentDecoding.decode(parts[1], plusIsSpace: true) : ""
        }
        return parameters
    }
}

/// `%XX` escapes of URLs; nil for a malformed escape or bytes that are not UTF-8.
public enum PercentDecoding {
    public static func decode(_ text: Substring, plusIsSpace: Bool = false) -> String? {
        var bytes: [UInt8] = []
        var rest = text.utf8[...]
        while let byte = rest.popFirst() {
            switch byte {
            case UInt8(ascii: "%"):
                guard rest.count >= 2, let value = UInt8(String(decoding: rest.prefix(2), as: UTF8.self), radix: 16)
                else { return nil }
                bytes.append(value)
                rest = rest.dropFirst(2)
            case UInt8(ascii: "+") where plusIsSpace:
                bytes.append(UInt8(ascii: " "))
            default:
                bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }
}

/// Reads HTTP/1.1 requests from a connection's bytes with http_parser (the parser libuv's HTTP
/// servers were built on), with limits on the size of the head and of the body. Requests come
/// out whole; after a request that upgrades the connection, the bytes that follow it are handed
/// back for the new protocol and nothing more is read.
public final class HTTPRequestReader {
    /// Why the bytes are not HTTP this daemon serves; the connection gets a 4xx and is closed.
    public enum Failure: Error, Equatable {
        case malformed(String)
        case headTooLarge(limit: Int)
        case bodyTooLarge(limit: Int)

        /// The status that answers it.
        public var status: Int {
            switch self {
            case .malformed: 400
            case .headTooLarge: 431
            case .bodyTooLarge: 413
            }
        }

        public var message: String {
            switch self {
            case .malformed(let detail): "malformed HTTP request: \(detail)"
            case .headTooLarge(let limit): "request line and headers longer than \(limit) bytes"
            case .bodyTooLarge(let limit): "request body longer than \(limit) bytes"
            }
        }
    }

    /// What one `feed` completed.
    public struct Output {
        /// Requests read whole, in order (also those before a failure).
        public var requests: [HTTPRequest] = []
        /// Set once a request upgraded the connection: the bytes after it.
        public var upgradeBytes: [UInt8]?
        /// Set when the bytes after `requests` are not HTTP this daemon serves: nothing more is read.
        public var failure: Failure?
    }

    private let parser: UnsafeMutablePointer<http_parser>
    private let maximumHeadBytes: Int
    private let maximumBodyBytes: Int
    private var completed: [HTTPRequest] = []
    private var url: [UInt8] = []
    private var field: [UInt8] = []
    private var value: [UInt8] = []
    /// The parser is inside a header's value: the next field starts a new header.
    private var inValue = false
    private var headers: [(name: String, value: String)] = []
    private var body: [UInt8] = []
    private var headBytes = 0
    private var exceeded: Failure?
    private var upgraded = false

    public init(maximumHeadBytes: Int = 16 * 1024, maximumBodyBytes: Int = 1 << 20) {
        self.maximumHeadBytes = maximumHeadBytes
        self.maximumBodyBytes = maximumBodyBytes
        parser = .allocate(capacity: 1)
        parser.initialize(to: http_parser())
        http_parser_init(parser, HTTP_REQUEST)
        parser.pointee.data = Unmanaged.passUnretained(self).toOpaque()
    }

    deinit {
        parser.deallocate()
    }

    public func feed(_ bytes: UnsafeRawBufferPointer) -> Output {
        guard !upgraded, let start = bytes.baseAddress, !bytes.isEmpty else { return Output() }
        let parsed = withUnsafePointer(to: Self.settings) { settings in
            http_parser_execute(parser, settings, start.assumingMemoryBound(to: CChar.self), bytes.count)
        }
        var output = Output(requests: completed)
        completed = []
        let code = dc_http_errno(parser)
        if let exceeded {
            output.failure = exceeded
        } else if code != HPE_OK.rawValue {
            output.failure = .malformed(String(cString: http_errno_description(http_errno(code))))
        }
        guard output.failure == nil else { return output }
        if dc_http_is_upgrade(parser) != 0 {
            upgraded = true
            output.upgradeBytes = Array(bytes[min(parsed, bytes.count)...])
        }
        return output
    }

    // MARK: - http_parser's callbacks

    private static func reader(_ parser: UnsafeMutablePointer<http_parser>?) -> HTTPRequestReader? {
        guard let data = parser?.pointee.data else { return nil }
        return Unmanaged<HTTPRequestReader>.fromOpaque(data).takeUnretainedValue()
    }

    /// Adds head bytes; false (stop the parser) past the limit.
    private func countHead(_ length: Int) -> Bool {
        headBytes += length
        guard headBytes <= maximumHeadBytes else {
            exceeded = .headTooLarge(limit: maximumHeadBytes)
            return false
        }
        return true
    }

    private func commitHeader() {
        inValue = false
        guard !field.isEmpty else { return }
        let name = String(decoding: field, as: UTF8.self).lowercased()
        headers.append((name, String(decoding: value, as: UTF8.self)))
        field = []
        value = []
    }

    private static func append(
        _ at: UnsafePointer<CChar>?, _ length: Int, to keyPath: ReferenceWritableKeyPath<HTTPRequestReader, [UInt8]>,
        of parser: UnsafeMutablePointer<http_parser>?
    ) -> Int32 {
        guard let reader = reader(parser), let at else { return 1 }
        guard reader.countHead(length) else { return 1 }
        reader[keyPath: keyPath].append(
            contentsOf: UnsafeRawBufferPointer(start: UnsafeRawPointer(at), count: length))
        return 0
    }

    private static let settings: http_parser_settings = {
        var settings = http_parser_settings()
        settings.on_message_begin = { parser in
            guard let reader = reader(parser) else { return 1 }
            reader.url = []
            reader.headers = []
            reader.field = []
            reader.value = []
            reader.inValue = false
            reader.body = []
            reader.headBytes = 0
            return 0
        }
        settings.on_url = { parser, at, length in append(at, length, to: \.url, of: parser) }
        settings.on_header_field = { parser, at, length in
            guard let reader = reader(parser) else { return 1 }
            if reader.inValue { reader.commitHeader() }
            return append(at, length, to: \.field, of: parser)
        }
        settings.on_header_value = { parser, at, length in
            reader(parser)?.inValue = true
            return append(at, length, to: \.value, of: parser)
        }
        settings.on_headers_complete = { parser in
            reader(parser)?.commitHeader()
            return 0
        }
        settings.on_body = { parser, at, length in
            guard let reader = reader(parser), let at else { return 1 }
            guard reader.body.count + length <= reader.maximumBodyBytes else {
                reader.exceeded = .bodyTooLarge(limit: reader.maximumBodyBytes)
                return 1
            }
            reader.body.append(contentsOf: UnsafeRawBufferPointer(start: UnsafeRawPointer(at), count: length))
            return 0
        }
        settings.on_message_complete = { parser in
            guard let parser, let reader = reader(parser) else { return 1 }
            let method = String(cString: http_method_str(http_method(dc_http_method(parser))))
            reader.completed.append(
                HTTPRequest(
                    method: method, target: String(decoding: reader.url, as: UTF8.self), headers: reader.headers,
                    body: reader.body, keepAlive: http_should_keep_alive(parser) != 0,
                    isUpgrade: dc_http_is_upgrade(parser) != 0))
            return 0
        }
        return settings
    }()
}

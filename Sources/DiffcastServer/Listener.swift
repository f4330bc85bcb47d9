import CLibUV
import CSystem
import Glibc

/// Binds the daemon's listening sockets and hands accepted streams to the server.
enum Listener {
    private static let backlog: Int32 = 4096

    /// A Unix socket at `path`. A stale socket that nobody answers is replaced; a live daemon on
    /// it is refused, and so is anything there that is not a socket (it is never removed).
    static func unix(path: String, server: Server) throws -> UnsafeMutableRawPointer {
        let limit = Int(dc_unix_path_max())
        guard path.utf8.count <= limit else { throw ServerError.socketPathTooLong(path, limit: limit) }
        var found = stat()
        if lstat(path, &found) == 0 {
            guard found.st_mode & S_IFMT == S_IFSOCK else { throw ServerError.notASocket(path) }
            let probe = dc_probe_unix_socket(path)
            if probe == 0 { throw ServerError.alreadyServed(path) }
            if probe == ECONNREFUSED {
                server.logger.info("removing a stale socket file", metadata: ["path": "\(path)"])
                unlink(path)
            }
        } else {
            // libuv reports a missing directory as "permission denied".
            let directory = path.contains("/") ? String(path[..<(path.lastIndex(of: "/") ?? path.endIndex)]) : "."
            var folder = stat()
            if stat(directory.isEmpty ? "/" : directory, &folder) != 0 || folder.st_mode & S_IFMT != S_IFDIR {
                throw ServerError.noDirectory(path, directory: directory)
            }
        }
        let handle = LoopHandles.make(UV_NAMED_PIPE)
        try initialize(handle, as: UV_NAMED_PIPE, on: server.loop, describedAs: "socket \(path)")
        let bound = uv_pipe_bind(LoopHandles.pipe(handle), path)
        return try listen(handle, bound: bound, describedAs: "socket \(path)", server: server)
    }

    /// The tag of a listening handle: which endpoint its connections arrive at. Line clients
    /// (the socket, `--tcp`, systemd's sockets) carry none; the stream's type tells those apart.
    private static func tag(of endpoint: Endpoint) -> UInt {
        switch endpoint {
        case .socket, .tcp: 0
        case .metrics: 1
        case .http: 2
        }
    }

    private static func endpoint(tag: UInt, type: uv_handle_type) -> Endpoint {
        switch tag {
        case Self.tag(of: .metrics): .metrics
        case Self.tag(of: .http): .http
        default: type == UV_TCP ? .tcp : .socket
        }
    }

    /// A TCP listener on `host:port` (IPv4 or IPv6 literal) for `endpoint` (`.tcp`, `.http` or
    /// `.metrics`).
    static func tcp(address: String, server: Server, endpoint: Endpoint = .tcp) throws -> UnsafeMutableRawPointer {
        guard let colon = address.lastIndex(of: ":"), let port = Int32(address[address.index(after: colon)...]) else {
            throw ServerError.badAddress(address)
        }
        let host = String(address[..<colon].filter { $0 != "[" && $0 != "]" })
        guard let socketAddress = SocketAddress(host: host, port: port) else { throw ServerError.badAddress(address) }
        let handle = LoopHandles.make(UV_TCP)
        try initialize(handle, as: UV_TCP, on: server.loop, describedAs: "tcp \(address)")
        let bound = socketAddress.withSockaddr { address, _ in uv_tcp_bind(LoopHandles.tcp(handle), address, 0) }
        // The endpoint rides in the listening handle's data (connections use theirs for their id).
        LoopHandles.setTag(tag(of: endpoint), of: handle)
        let description =
            switch endpoint {
            case .metrics: "metrics http://\(address)/metrics"
            case .http: "http://\(address)/"
            case .socket, .tcp: "tcp \(address)"
            }
        return try listen(handle, bound: bound, describedAs: description, server: server)
    }

    /// A listening socket inherited from systemd's socket activation (Unix or TCP).
    static func inherited(descriptor: Int32, server: Server) throws -> UnsafeMutableRawPointer {
        let address = SocketAddress(boundTo: descriptor)
        let isUnix = address?.isUnix == true
        let type = isUnix ? UV_NAMED_PIPE : UV_TCP
        let handle = LoopHandles.make(type)
        try initialize(handle, as: type, on: server.loop, describedAs: "inherited fd \(descriptor)")
        let opened =
            isUnix
            ? uv_pipe_open(LoopHandles.pipe(handle), descriptor)
            : uv_tcp_open(LoopHandles.tcp(handle), uv_os_sock_t(descriptor))
        var name = "inherited fd \(descriptor)"
        if let path = address?.unixPath, !path.isEmpty { name += " (\(path))" }
        return try listen(handle, bound: opened, describedAs: name, server: server)
    }

    /// Starts listening on a bound (or inherited) handle; on any failure closes it and throws.
    private static func listen(
        _ handle: UnsafeMutableRawPointer, bound: Int32, describedAs what: String, server: Server
    ) throws -> UnsafeMutableRawPointer {
        var result = bound
        if result == 0 {
            result = uv_listen(dc_stream(handle), backlog) { stream, status in
                guard let stream else { return }
                Listener.didConnect(stream, status: status, type: dc_handle(stream).pointee.type)
            }
        }
        guard result == 0 else {
            LoopHandles.close(handle)
            throw ServerError.libuv("listening on \(what)", result)
        }
        server.logger.info("listening on \(what)")
        server.listenerNames.append(what)
        return handle
    }

    static func close(_ handle: UnsafeMutableRawPointer, removingSocketAt path: String?) {
        if dc_handle(handle).pointee.type == UV_NAMED_PIPE, let path {
            unlink(path)
        }
        LoopHandles.close(handle)
    }

    /// Initializes a stream handle of `type` on `loop`; one that cannot be is freed, and its
    /// listener does not start.
    private static func initialize(
        _ handle: UnsafeMutableRawPointer, as type: uv_handle_type, on loop: UnsafeMutablePointer<uv_loop_t>?,
        describedAs what: String
    ) throws {
        let result = initializeStream(handle, as: type, on: loop)
        guard result == 0 else {
            LoopHandles.discard(handle)
            throw ServerError.libuv("making a handle for \(what)", result)
        }
    }

    private static func initializeStream(
        _ handle: UnsafeMutableRawPointer, as type: uv_handle_type, on loop: UnsafeMutablePointer<uv_loop_t>?
    ) -> Int32 {
        type == UV_TCP
            ? uv_tcp_init(loop, LoopHandles.tcp(handle))
            : uv_pipe_init(loop, LoopHandles.pipe(handle), 0)
    }

    private static func didConnect(_ stream: UnsafeMutablePointer<uv_stream_t>?, status: Int32, type: uv_handle_type) {
        guard let stream, status == 0, let server = Server.from(stream) else { return }
        let client = LoopHandles.make(type)
        guard initializeStream(client, as: type, on: stream.pointee.loop) == 0 else {
            LoopHandles.discard(client)
            return
        }
        guard uv_accept(stream, dc_stream(client)) == 0 else {
            LoopHandles.close(client)
            return
        }
        server.accept(client, at: endpoint(tag: LoopHandles.tag(of: UnsafeMutableRawPointer(stream)), type: type))
    }
}

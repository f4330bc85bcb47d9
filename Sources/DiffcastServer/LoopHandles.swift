import CLibUV

/// Owns the memory of the daemon's libuv handles and requests, and what their `data` pointers
/// hold, so that no other file allocates, frees or tags one. A handle is allocated zeroed, at the size libuv asks
/// for its type, and freed only in its close callback (libuv touches it until then). Its `data`
/// holds a tag — a connection's id, a listener's purpose — never a pointer to a Swift object;
/// the loop's own `data` is the exception: the server, which outlives the loop.
enum LoopHandles {
    /// A zeroed handle of `type` (UV_TCP, UV_NAMED_PIPE, UV_TIMER, UV_SIGNAL, UV_ASYNC).
    static func make(_ type: uv_handle_type) -> UnsafeMutableRawPointer {
        let size = uv_handle_size(type)
        let handle = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16)
        handle.initializeMemory(as: UInt8.self, repeating: 0, count: size)
        return handle
    }

    /// A zeroed handle, typed: `make(uv_timer_t.self, UV_TIMER)`.
    static func make<Handle>(_: Handle.Type, _ type: uv_handle_type) -> UnsafeMutablePointer<Handle> {
        make(type).assumingMemoryBound(to: Handle.self)
    }

    /// Closes a handle and frees its memory in the close callback; a handle that is closing
    /// already is left to the close under way.
    static func close(_ handle: UnsafeMutableRawPointer) {
        guard uv_is_closing(dc_handle(handle)) == 0 else { return }
        uv_close(dc_handle(handle)) { $0.map { UnsafeMutableRawPointer($0).deallocate() } }
    }

    static func close<Handle>(_ handle: UnsafeMutablePointer<Handle>) {
        close(UnsafeMutableRawPointer(handle))
    }

    /// Frees a handle that was never initialized on a loop (its init failed).
    static func discard(_ handle: UnsafeMutableRawPointer) {
        handle.deallocate()
    }

    static func setTag(_ tag: UInt, of handle: UnsafeMutableRawPointer) {
        dc_handle(handle).pointee.data = UnsafeMutableRawPointer(bitPattern: tag)
    }

    /// The tag set on a handle; 0 when none was.
    static func tag(of handle: UnsafeMutableRawPointer) -> UInt {
        UInt(bitPattern: dc_handle(handle).pointee.data)
    }

    // MARK: - Requests

    /// A write request whose `data` keeps `context` alive until `finish` (or `abandon`) takes it.
    static func makeWrite(keeping context: AnyObject) -> UnsafeMutablePointer<uv_write_t> {
        let request = UnsafeMutablePointer<uv_write_t>.allocate(capacity: 1)
        request.initialize(to: uv_write_t())
        request.pointee.data = Unmanaged.passRetained(context).toOpaque()
        return request
    }

    /// In a write's callback: frees the request and hands back the context it kept.
    static func finish<Context: AnyObject>(_ request: UnsafeMutablePointer<uv_write_t>, as _: Context.Type) -> Context?
    {
        let context = request.pointee.data.map { Unmanaged<Context>.fromOpaque($0).takeRetainedValue() }
        request.deallocate()
        return context
    }

    /// A write that libuv did not take: its context is released and the request freed.
    static func abandon(_ request: UnsafeMutablePointer<uv_write_t>) {
        if let data = request.pointee.data { Unmanaged<AnyObject>.fromOpaque(data).release() }
        request.deallocate()
    }

    /// A shutdown request, freed by `free` in its callback (or when libuv did not take it).
    static func makeShutdown() -> UnsafeMutablePointer<uv_shutdown_t> {
        let request = UnsafeMutablePointer<uv_shutdown_t>.allocate(capacity: 1)
        request.initialize(to: uv_shutdown_t())
        return request
    }

    static func free(_ request: UnsafeMutablePointer<uv_shutdown_t>) {
        request.deallocate()
    }
}

import CLibUV

/// Owns the memory libuv reads and writes — the loop, its handles and requests, the read buffer
/// — and what their `data` pointers hold, so that no other file allocates, frees, tags or
/// retypes one. With `SocketAddress` (addresses) and `WriterThreads` (`writev` of pending
/// writes), the only code of the server that reads memory as another type.
///
/// A handle is allocated zeroed, at the size libuv asks for its type, and freed only in its close
/// callback (libuv touches it until then). Its `data` holds a tag — a connection's id, a
/// listener's purpose — never a pointer to a Swift object; the loop's own `data` is the
/// exception: its owner, the server, which outlives the loop.
enum LoopHandles {
    // MARK: - The loop

    /// A loop's memory; `uv_loop_init` initializes it, `free` releases it after `uv_loop_close`.
    static func makeLoop() -> UnsafeMutablePointer<uv_loop_t> {
        allocate(uv_loop_t())
    }

    static func free(_ loop: UnsafeMutablePointer<uv_loop_t>) {
        loop.deallocate()
    }

    /// Ties an initialized loop to the object that runs it, unretained: the owner outlives it.
    static func setOwner<Owner: AnyObject>(_ owner: Owner, of loop: UnsafeMutablePointer<uv_loop_t>) {
        loop.pointee.data = Unmanaged.passUnretained(owner).toOpaque()
    }

    /// The owner of the loop a handle belongs to, as `setOwner` tied it; nil before.
    static func owner<Owner: AnyObject>(ofLoopOf handle: UnsafeMutableRawPointer?, as _: Owner.Type) -> Owner? {
        guard let handle, let loop = dc_handle(handle).pointee.loop, let data = loop.pointee.data else { return nil }
        return Unmanaged<Owner>.fromOpaque(data).takeUnretainedValue()
    }

    /// The buffer every read of the loop fills (one read at a time, on the loop's thread).
    static func makeReadBuffer(byteCount: Int) -> UnsafeMutableRawBufferPointer {
        .allocate(byteCount: byteCount, alignment: 16)
    }

    static func free(_ buffer: UnsafeMutableRawBufferPointer) {
        buffer.deallocate()
    }

    // MARK: - Handles

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

    static func discard<Handle>(_ handle: UnsafeMutablePointer<Handle>) {
        discard(UnsafeMutableRawPointer(handle))
    }

    /// Frees a handle that was never initialized on a loop (its init failed).
    static func discard(_ handle: UnsafeMutableRawPointer) {
        handle.deallocate()
    }

    /// A TCP handle as libuv's type. Debug builds (`DIFFCAST_INTERNAL_CHECKS`) check that it is
    /// one, or a zeroed handle its init has not typed yet.
    static func tcp(_ handle: UnsafeMutableRawPointer) -> UnsafeMutablePointer<uv_tcp_t> {
        checkType(of: handle, is: UV_TCP)
        return handle.assumingMemoryBound(to: uv_tcp_t.self)
    }

    /// A Unix-socket handle as libuv's type, checked as `tcp(_:)` is.
    static func pipe(_ handle: UnsafeMutableRawPointer) -> UnsafeMutablePointer<uv_pipe_t> {
        checkType(of: handle, is: UV_NAMED_PIPE)
        return handle.assumingMemoryBound(to: uv_pipe_t.self)
    }

    private static func checkType(of handle: UnsafeMutableRawPointer, is type: uv_handle_type) {
        #if DIFFCAST_INTERNAL_CHECKS
            let actual = dc_handle(handle).pointee.type
            precondition(actual == type || actual == UV_UNKNOWN_HANDLE, "a handle of type \(actual) used as \(type)")
        #endif
    }

    /// libuv's view of `count` bytes at `start`, for a read or a write.
    static func buffer(_ start: UnsafeRawPointer, count: Int) -> uv_buf_t {
        uv_buf_init(UnsafeMutableRawPointer(mutating: start).assumingMemoryBound(to: CChar.self), UInt32(count))
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
        let request = allocate(uv_write_t())
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
        allocate(uv_shutdown_t())
    }

    static func free(_ request: UnsafeMutablePointer<uv_shutdown_t>) {
        request.deallocate()
    }

    /// One of libuv's structs, allocated and zeroed (`zero` is its Swift zero initializer), as
    /// C code gets it from `calloc`.
    private static func allocate<Value>(_ zero: Value) -> UnsafeMutablePointer<Value> {
        let pointer = UnsafeMutablePointer<Value>.allocate(capacity: 1)
        pointer.initialize(to: zero)
        return pointer
    }
}

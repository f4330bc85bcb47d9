#if canImport(Glibc)
    import Glibc
#endif

/// A value that several threads share, guarded by a pthread mutex.
///
/// `Synchronization.Mutex` locks with a futex, which ThreadSanitizer does not see: two threads
/// adding to a counter under it are reported as a race although the total comes out exact
/// (scripts/tsan-mutex-probe.swift shows it). Every lock shared across threads in Diffcast is
/// this one, so that `make test-sanitize` reports only real races. Uncontended, a lock and an
/// unlock cost about what the futex does.
public final class Locked<Value>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    public init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with the value, holding the lock.
    public func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}

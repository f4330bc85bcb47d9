import CLibUV
import DiffcastCore
import DiffcastEngine

/// Carries outcomes from the apply queue's thread to the loop thread: a locked list plus
/// `uv_async_send`, whose wake-ups coalesce, so the loop takes everything queued at each wake.
final class OutcomeMailbox: @unchecked Sendable {
    private struct State {
        var outcomes: [Outcome] = []
        var isOpen = true
    }

    private let state = Locked<State>(State())
    /// Written once on the loop thread before any send; libuv makes `uv_async_send` thread-safe.
    let handle: UnsafeMutablePointer<uv_async_t>

    init(handle: UnsafeMutablePointer<uv_async_t>) {
        self.handle = handle
    }

    /// From any thread: queue outcomes and wake the loop. The wake is sent under the lock, so
    /// once `close` returns no send is under way: the handle's memory is freed by its close.
    func post(_ outcomes: [Outcome]) {
        state.withLock { state in
            guard state.isOpen else { return }
            state.outcomes.append(contentsOf: outcomes)
            uv_async_send(handle)
        }
    }

    /// On the loop thread: everything posted so far.
    func take() -> [Outcome] {
        state.withLock { $0.outcomes.swapAndClear() }
    }

    /// On the loop thread, before the async handle is closed: later posts are dropped.
    func close() {
        state.withLock { $0.isOpen = false }
    }
}

// ThreadSanitizer and Synchronization.Mutex: four threads add 100,000 each to a counter under a
// Mutex; the total is exact, yet TSan reports a race, because Mutex locks with a futex that TSan
// does not intercept. Diffcast's shared locks are therefore `Locked` (pthread, DiffcastCore).
//
//   swiftc -sanitize=thread -O scripts/tsan-mutex-probe.swift -o /tmp/probe && /tmp/probe
import Synchronization
import Dispatch
let counter = Mutex<Int>(0)
DispatchQueue.concurrentPerform(iterations: 4) { _ in
    for _ in 0..<100_000 { counter.withLock { $0 += 1 } }
}
print("total", counter.withLock { $0 })

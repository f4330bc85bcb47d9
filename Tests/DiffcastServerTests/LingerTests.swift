import Testing

@testable import DiffcastServer

/// The linger of event streams grows with the time a flush takes, and never below the setting
/// nor above its ceiling: golden values at each side of each bound.
@Suite struct LingerTests {
    @Test func aShortFlushLingersAsConfiguredALongOneAThirdOfItsTime() {
        let linger = { (configured: UInt64, flushMilliseconds: Double) in
            Server.lingerMilliseconds(
                configured: configured,
                after: LingerFlush(nanoseconds: UInt64(flushMilliseconds * 1e6), bytesPerStream: 300, wroteWhole: true))
        }
        // Ten streams: a flush of 0.1 ms; the setting rules.
        #expect(linger(1, 0.1) == 1)
        #expect(linger(1, 0) == 1)
        #expect(linger(5, 2.9) == 5)
        // A thousand streams: a flush of 10 ms lingers 3 ms.
        #expect(linger(1, 10) == 3)
        #expect(linger(1, 5.99) == 1)
        #expect(linger(1, 6) == 2)
        // Never past the ceiling, whatever a stalled flush took.
        #expect(linger(1, 150) == 50)
        #expect(linger(1, 149.9) == 49)
        #expect(linger(1, 3_000_000) == Server.maximumLingerMilliseconds)
        #expect(Server.maximumLingerMilliseconds == 50)
        // A configured linger above the ceiling stays as configured.
        #expect(linger(80, 300) == 80)
    }

    @Test func aFlushOfLargeWritesOrOneThatLeftAWriteOverLingersAsConfigured() {
        let linger = { (configured: UInt64, bytes: Int, wroteWhole: Bool) in
            Server.lingerMilliseconds(
                configured: configured,
                after: LingerFlush(nanoseconds: 30_000_000, bytesPerStream: bytes, wroteWhole: wroteWhole))
        }
        #expect(Server.smallWriteBytes == 2048)
        #expect(linger(1, 0, true) == 10)
        #expect(linger(1, 2047, true) == 10)
        #expect(linger(1, 2048, true) == 1)
        #expect(linger(1, 7000, true) == 1)
        #expect(linger(1, 300, false) == 1)
        #expect(linger(20, 300, false) == 20)
    }
}

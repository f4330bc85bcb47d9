import DiffcastWire

/// A response or event as a value, with the bytes it is sent as: encoded once, on the thread
/// that made it (the apply worker, so that the loop never encodes), and shared by every
/// connection it goes to. Tests and the shared log read `value`; the loop writes `bytes`.
///
/// Trade-offs (`make bench BENCH=allocations`, `BENCH=memory` show them): as a struct it costs
/// no allocation, where a class would cost two more per version; an outcome keeps its event's
/// value until the loop delivers it, a little more memory per collection made in large batches.
public struct Encoded<Value: Sendable>: Sendable {
    public let value: Value
    public let bytes: SharedBytes

    /// A value with the bytes it arrived as (an answer another daemon relayed).
    public init(_ value: Value, bytes: SharedBytes) {
        self.value = value
        self.bytes = bytes
    }
}

extension Encoded where Value == Response {
    public init(_ response: Response) {
        self.init(response, bytes: SharedBytes(WireEncoder.encode(response)))
    }
}

extension Encoded where Value == Event {
    public init(_ event: Event) {
        self.init(event, bytes: SharedBytes(WireEncoder.encode(event)))
    }
}

import CLibUV

/// One client stream on the loop thread: frames lines in, sends responses in request order,
/// and queues outbound bytes. It knows nothing of collections; `Server` decides what to send.
final class Connection {
    let id: ConnectionID
    /// A `uv_pipe_t` or `uv_tcp_t`, allocated and zeroed by us, freed in its close callback.
    let handle: UnsafeMutableRawPointer
    var framer: LineFramer
    /// Subscriptions of this connection by collection name.
    var subscriptions: [String: Subscription] = [:]
    /// Whether the peer may publish: false until a TCP client authenticates, when a token is set.
    var isAuthenticated: Bool
    /// Who the peer is, for Unix sockets.
    var peer: PeerCredentials?

    private(set) var nextSlot: UInt64 = 0
    private var nextSlotToSend: UInt64 = 0
    private var answeredOutOfTurn: [UInt64: SharedBytes] = [:]
    private var outbound: [SharedBytes] = []
    private var outboundBytes = 0
    private(set) var bytesInFlight = 0
    private(set) var isWriting = false
    /// The peer sent EOF: finish answering, then shut down.
    var peerFinished = false
    private(set) var isClosing = false

    let isTCP: Bool

    init(id: ConnectionID, handle: UnsafeMutableRawPointer, maximumLineBytes: Int, isAuthenticated: Bool, isTCP: Bool) {
        self.id = id
        self.isTCP = isTCP
        self.handle = handle
        self.framer = LineFramer(maximumLineBytes: maximumLineBytes)
        self.isAuthenticated = isAuthenticated
    }

    /// Bytes queued or being written but not yet taken by the kernel.
    var unsentBytes: Int { outboundBytes + bytesInFlight }

    /// Requests read whose responses have not been queued yet.
    var outstandingRequests: UInt64 { nextSlot - nextSlotToSend }

    /// Reading stopped for backpressure.
    var isReadingPaused = false

    var hasOutbound: Bool { !outbound.isEmpty }

    func reserveSlot() -> UInt64 {
        defer { nextSlot += 1 }
        return nextSlot
    }

    /// Places a response; it is sent once every earlier request has been answered.
    func answer(slot: UInt64, _ response: SharedBytes) {
        guard slot >= nextSlotToSend else { return }
        guard slot == nextSlotToSend else {
            answeredOutOfTurn[slot] = response
            return
        }
        // The usual case, an answer in turn, goes out without a detour through the dictionary.
        enqueue(response)
        nextSlotToSend += 1
        while !answeredOutOfTurn.isEmpty, let ready = answeredOutOfTurn.removeValue(forKey: nextSlotToSend) {
            enqueue(ready)
            nextSlotToSend += 1
        }
    }

    func enqueue(_ bytes: SharedBytes) {
        guard bytes.count > 0, !isClosing else { return }
        outbound.append(bytes)
        outboundBytes += bytes.count
    }

    /// Takes up to `limit` queued buffers for one vectored write.
    func takeOutbound(limit: Int) -> [SharedBytes] {
        let taken = Array(outbound.prefix(limit))
        outbound.removeFirst(taken.count)
        let bytes = taken.reduce(0) { $0 + $1.count }
        outboundBytes -= bytes
        bytesInFlight += bytes
        isWriting = true
        return taken
    }

    func writeFinished(bytes: Int) {
        bytesInFlight -= bytes
        isWriting = false
    }

    /// Forgets queued bytes that no write has taken yet.
    func discardOutbound() {
        outbound = []
        outboundBytes = 0
    }

    func markClosing() {
        isClosing = true
        outbound = []
        outboundBytes = 0
    }
}

/// A connection's place in a collection's stream of versions.
struct Subscription {
    /// The version of the last event queued to the connection.
    var version: UInt64
    /// Events are being skipped because the connection is behind; a catch-up follows.
    var isLagging = false
    var catchUpRequested = false
}

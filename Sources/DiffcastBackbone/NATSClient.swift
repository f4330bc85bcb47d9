import CNATS
import DiffcastCore
import Glibc

/// One connection to a NATS cluster with its JetStream context. libnats is thread-safe; every
/// method blocks (so none is ever called on the loop thread), and subscription handlers run on
/// libnats' own threads.
final class NATSClient: @unchecked Sendable {
    private let connection: OpaquePointer
    private let jetStream: OpaquePointer
    private let handlers = Locked<[MessageHandlerBox]>([])
    private let subscriptions = Locked<[SubscriptionHandle]>([])
    /// Told of errors libnats meets on its own threads (a slow consumer, missed heartbeats).
    private let errorHandler: ErrorHandlerBox

    /// Connects to the first server of `servers` that answers; reconnects for ever afterwards.
    /// `onError` hears of the errors libnats meets on its own threads, with their text.
    init(
        servers: [String], name: String, credentials: NATSCredentials = NATSCredentials(),
        onError: @escaping @Sendable (String) -> Void
    ) throws {
        errorHandler = ErrorHandlerBox(onError)
        var options: OpaquePointer?
        try check(natsOptions_Create(&options), "natsOptions_Create")
        defer { natsOptions_Destroy(options) }
        natsOptions_SetErrorHandler(options, Self.errorCallback, errorHandler.opaque)
        let copies = servers.map { strdup($0) }
        defer { copies.forEach { free($0) } }
        var pointers = copies.map { UnsafePointer<CChar>($0) }
        try check(natsOptions_SetServers(options, &pointers, Int32(pointers.count)), "servers \(servers)")
        natsOptions_SetName(options, name)
        natsOptions_SetMaxReconnect(options, -1)
        natsOptions_SetReconnectWait(options, 250)
        natsOptions_SetTimeout(options, 2000)
        // A server cut off (not closed) is noticed within seconds, not libnats' default of two
        // minutes of pings: until then the daemon's requests wait on a dead connection.
        natsOptions_SetPingInterval(options, 1000)
        natsOptions_SetMaxPingsOut(options, 3)
        try credentials.apply(to: options)
        var connection: OpaquePointer?
        let connected = natsConnection_Connect(&connection, options)
        if connected == NATS_NOT_PERMITTED || connected == NATS_CONNECTION_AUTH_FAILED {
            throw NATSError(
                "the NATS servers \(servers.joined(separator: ",")) refused this daemon's credentials "
                    + "(backbone_user/backbone_password, backbone_token or backbone_creds)", connected)
        }
        try check(connected, "connecting to \(servers.joined(separator: ","))")
        var jetStream: OpaquePointer?
        var jsOptions = jsOptions()
        jsOptions_Init(&jsOptions)
        jsOptions.Wait = 5000
        let status = natsConnection_JetStream(&jetStream, connection, &jsOptions)
        guard status == NATS_OK, let connection, let jetStream else {
            natsConnection_Destroy(connection)
            throw NATSError("JetStream context", status)
        }
        self.connection = connection
        self.jetStream = jetStream
    }

    /// Unsubscribes, flushes and closes the connection.
    func close() {
        let open = subscriptions.withLock { subscriptions in
            defer { subscriptions = [] }
            return subscriptions
        }
        for subscription in open {
            natsSubscription_Unsubscribe(subscription.pointer)
            natsSubscription_Destroy(subscription.pointer)
        }
        natsConnection_FlushTimeout(connection, 1000)
        natsConnection_Close(connection)
        jsCtx_Destroy(jetStream)
        natsConnection_Destroy(connection)
    }

    // MARK: - Streams

    /// Makes sure a stream exists; an existing one is used as it is.
    func ensureStream(
        name: String, subjects: [String], replicas: Int, maximumMessagesPerSubject: Int64 = -1
    ) throws {
        var info: UnsafeMutablePointer<jsStreamInfo>?
        var code = jsErrCode(0)
        var status = js_GetStreamInfo(&info, jetStream, name, nil, &code)
        if status == NATS_OK {
            jsStreamInfo_Destroy(info)
            return
        }
        guard code == JSStreamNotFoundErr || status == NATS_NOT_FOUND else {
            throw NATSError("looking up stream \(name)", status, code: code)
        }
        var config = jsStreamConfig()
        jsStreamConfig_Init(&config)
        let subjectCopies = subjects.map { strdup($0) }
        defer { subjectCopies.forEach { free($0) } }
        var subjectPointers = subjectCopies.map { UnsafePointer<CChar>($0) }
        status = name.withCString { name in
            subjectPointers.withUnsafeMutableBufferPointer { subjects in
                config.Name = name
                config.Subjects = subjects.baseAddress
                config.SubjectsLen = Int32(subjects.count)
                config.Replicas = Int64(replicas)
                config.Storage = js_FileStorage
                config.MaxMsgsPerSubject = maximumMessagesPerSubject
                config.AllowDirect = true
                config.Duplicates = 120 * 1_000_000_000
                return js_AddStream(&info, jetStream, &config, nil, &code)
            }
        }
        // Another daemon may have made it first.
        guard status == NATS_OK || code == JSStreamNameExistErr else {
            throw NATSError("creating stream \(name)", status, code: code)
        }
        jsStreamInfo_Destroy(info)
    }

    /// Appends a message to a stream's subject; returns its stream sequence. With
    /// `expectedLastSequence`, only if the subject's last message is still that one (0: the
    /// subject is empty). A `messageID` makes a retry of the same message (after a timeout)
    /// answer with the first copy's sequence instead of storing it twice.
    func publish(
        _ subject: String, _ data: [UInt8], messageID: String? = nil, expectedLastSequence: UInt64? = nil,
        timeoutMilliseconds: Int64
    ) throws -> UInt64 {
        var options = jsPubOptions()
        jsPubOptions_Init(&options)
        options.MaxWait = timeoutMilliseconds
        switch expectedLastSequence {
        case 0?: options.ExpectNoMessage = true
        case let sequence?: options.ExpectLastSubjectSeq = sequence
        case nil: break
        }
        let id = messageID.flatMap { strdup($0) }
        defer { free(id) }
        options.MsgId = id.map { UnsafePointer($0) }
        var code = jsErrCode(0)
        var ack: UnsafeMutablePointer<jsPubAck>?
        let status = data.withUnsafeBytes { bytes in
            js_Publish(&ack, jetStream, subject, bytes.baseAddress, Int32(bytes.count), &options, &code)
        }
        guard status == NATS_OK, let ack else { throw NATSError("publishing to \(subject)", status, code: code) }
        defer { jsPubAck_Destroy(ack) }
        return ack.pointee.Sequence
    }

    /// The subject's last message (its stream sequence and data), nil when it has none.
    func lastMessage(stream: String, subject: String) throws -> (sequence: UInt64, data: [UInt8])? {
        var message: OpaquePointer?
        var code = jsErrCode(0)
        let status = js_GetLastMsg(&message, jetStream, stream, subject, nil, &code)
        if code == JSNoMessageFoundErr || status == NATS_NOT_FOUND { return nil }
        guard status == NATS_OK, let message else { throw NATSError("last message of \(subject)", status, code: code) }
        defer { natsMsg_Destroy(message) }
        return (natsMsg_GetSequence(message), Self.data(of: message))
    }

    /// The stream's message at `sequence`, read through the stream's leader; nil when there is
    /// none (it was cut from the stream, or never stored).
    func message(stream: String, sequence: UInt64) throws -> StreamMessage? {
        var message: OpaquePointer?
        var code = jsErrCode(0)
        let status = js_GetMsg(&message, jetStream, stream, sequence, nil, &code)
        if code == JSNoMessageFoundErr || status == NATS_NOT_FOUND { return nil }
        guard status == NATS_OK, let message else {
            throw NATSError("message \(sequence) of \(stream)", status, code: code)
        }
        defer { natsMsg_Destroy(message) }
        let subject = natsMsg_GetSubject(message).map { String(cString: $0) } ?? ""
        return StreamMessage(sequence: natsMsg_GetSequence(message), subject: subject, data: Self.data(of: message))
    }

    /// The last message of every subject of a stream matching `subject`.
    func lastMessagePerSubject(stream: String, subject: String) throws -> [[UInt8]] {
        guard try lastSequence(stream: stream) > 0 else { return [] }
        var options = jsSubOptions()
        jsSubOptions_Init(&options)
        options.Ordered = true
        options.Config.DeliverPolicy = js_DeliverLastPerSubject
        var subscription: OpaquePointer?
        var code = jsErrCode(0)
        let status = js_SubscribeSync(&subscription, jetStream, subject, nil, &options, &code)
        guard status == NATS_OK, let subscription else { throw NATSError("reading \(subject)", status, code: code) }
        defer {
            natsSubscription_Unsubscribe(subscription)
            natsSubscription_Destroy(subscription)
        }
        var messages: [[UInt8]] = []
        while true {
            var message: OpaquePointer?
            let status = natsSubscription_NextMsg(&message, subscription, 5000)
            guard status == NATS_OK, let message else { throw NATSError("reading \(subject)", status) }
            defer { natsMsg_Destroy(message) }
            messages.append(Self.data(of: message))
            var metadata: UnsafeMutablePointer<jsMsgMetaData>?
            guard natsMsg_GetMetaData(&metadata, message) == NATS_OK, let metadata else { continue }
            let pending = metadata.pointee.NumPending
            jsMsgMetaData_Destroy(metadata)
            if pending == 0 { return messages }
        }
    }

    /// Removes the subject's messages before `sequence` from the stream.
    func purge(stream: String, subject: String, below sequence: UInt64) throws {
        var options = jsOptions()
        jsOptions_Init(&options)
        var code = jsErrCode(0)
        let status = subject.withCString { subject in
            options.Stream.Purge.Subject = subject
            options.Stream.Purge.Sequence = sequence
            return js_PurgeStream(jetStream, stream, &options, &code)
        }
        guard status == NATS_OK else { throw NATSError("purging \(subject)", status, code: code) }
    }

    /// The stream's last sequence over all its subjects.
    func lastSequence(stream: String) throws -> UInt64 {
        try sequences(stream: stream).last
    }

    /// The stream's first and last sequence over all its subjects (messages before the first
    /// were cut).
    func sequences(stream: String) throws -> (first: UInt64, last: UInt64) {
        var info: UnsafeMutablePointer<jsStreamInfo>?
        var code = jsErrCode(0)
        let status = js_GetStreamInfo(&info, jetStream, stream, nil, &code)
        guard status == NATS_OK, let info else { throw NATSError("stream \(stream)", status, code: code) }
        defer { jsStreamInfo_Destroy(info) }
        return (info.pointee.State.FirstSeq, info.pointee.State.LastSeq)
    }

    /// Reads every message of `subject` (wildcards allowed) in stream order from stream
    /// sequence `first`, then as they are stored: an ordered consumer, recreated by libnats
    /// after a gap or when its heartbeats (every second) stop. Returns the subscription, for
    /// `stopFollowing`.
    func follow(
        _ subject: String, from first: UInt64, handler: @escaping @Sendable (StreamMessage) -> Void
    ) throws -> SubscriptionHandle {
        var options = jsSubOptions()
        jsSubOptions_Init(&options)
        options.Ordered = true
        options.Config.DeliverPolicy = first <= 1 ? js_DeliverAll : js_DeliverByStartSequence
        options.Config.OptStartSeq = first <= 1 ? 0 : first
        // libnats' default (5 s, two missed) notices a consumer lost with its server only after
        // 10-20 s; the backbone's own watch (`NATSBackbone.checkFollowing`) covers the rest.
        options.Config.Heartbeat = 1_000_000_000
        let box = MessageHandlerBox { message in
            var metadata: UnsafeMutablePointer<jsMsgMetaData>?
            guard natsMsg_GetMetaData(&metadata, message) == NATS_OK, let metadata else { return }
            let sequence = metadata.pointee.Sequence.Stream
            jsMsgMetaData_Destroy(metadata)
            let subject = natsMsg_GetSubject(message).map { String(cString: $0) } ?? ""
            handler(StreamMessage(sequence: sequence, subject: subject, data: Self.data(of: message)))
        }
        var subscription: OpaquePointer?
        var code = jsErrCode(0)
        let status = js_Subscribe(
            &subscription, jetStream, subject, Self.callback, box.opaque, nil, &options, &code)
        guard status == NATS_OK, let subscription else { throw NATSError("following \(subject)", status, code: code) }
        natsSubscription_SetPendingLimits(subscription, -1, -1)
        return keep(box, subscription)
    }

    /// Ends delivery of a subscription made by `follow`. It is destroyed only by `close`:
    /// libnats may still be resetting a stalled ordered consumer on its own threads, and
    /// destroying it then made them use freed memory (a SIGSEGV seen in the backbone soak).
    func stopFollowing(_ subscription: SubscriptionHandle) {
        natsSubscription_Unsubscribe(subscription.pointer)
    }

    // MARK: - Core NATS

    /// Handles requests on `subject`; with a `queue`, each goes to one member of the group.
    func serve(_ subject: String, queue: String?, handler: @escaping @Sendable (Request) -> Void) throws {
        let box = MessageHandlerBox { message in
            guard let reply = natsMsg_GetReply(message) else { return }
            handler(Request(data: Self.data(of: message), replySubject: String(cString: reply)))
        }
        var subscription: OpaquePointer?
        let status =
            if let queue {
                natsConnection_QueueSubscribe(&subscription, connection, subject, queue, Self.callback, box.opaque)
            } else {
                natsConnection_Subscribe(&subscription, connection, subject, Self.callback, box.opaque)
            }
        guard status == NATS_OK, let subscription else { throw NATSError("subscribing to \(subject)", status) }
        natsSubscription_SetPendingLimits(subscription, -1, -1)
        keep(box, subscription)
    }

    /// Sends a request and waits for its one reply.
    func request(_ subject: String, _ data: [UInt8], timeoutMilliseconds: Int64) throws -> [UInt8] {
        var reply: OpaquePointer?
        let status = data.withUnsafeBytes { bytes in
            natsConnection_Request(
                &reply, connection, subject, bytes.baseAddress, Int32(bytes.count), timeoutMilliseconds)
        }
        guard status == NATS_OK, let reply else { throw NATSError("request to \(subject)", status) }
        defer { natsMsg_Destroy(reply) }
        return Self.data(of: reply)
    }

    func publish(_ subject: String, _ data: [UInt8]) {
        _ = data.withUnsafeBytes { bytes in
            natsConnection_Publish(connection, subject, bytes.baseAddress, Int32(bytes.count))
        }
    }

    // MARK: - Key-value

    /// Binds to a key-value bucket, creating it with this TTL when it does not exist.
    func keyValueBucket(_ name: String, ttlMilliseconds: Int64, replicas: Int) throws -> KeyValueBucket {
        var store: OpaquePointer?
        if js_KeyValue(&store, jetStream, name) == NATS_OK, let store { return KeyValueBucket(store: store) }
        var config = kvConfig()
        kvConfig_Init(&config)
        let status = name.withCString { name in
            config.Bucket = name
            config.History = 1
            config.TTL = ttlMilliseconds * 1_000_000
            config.Replicas = Int32(replicas)
            return js_CreateKeyValue(&store, jetStream, &config)
        }
        if status == NATS_OK, let store { return KeyValueBucket(store: store) }
        // Created by another daemon meanwhile.
        guard js_KeyValue(&store, jetStream, name) == NATS_OK, let store else {
            throw NATSError("key-value bucket \(name)", status)
        }
        return KeyValueBucket(store: store)
    }

    // MARK: - Plumbing

    struct StreamMessage: Sendable {
        let sequence: UInt64
        let subject: String
        let data: [UInt8]
    }

    struct Request: Sendable {
        let data: [UInt8]
        let replySubject: String
    }

    @discardableResult
    private func keep(_ box: MessageHandlerBox, _ subscription: OpaquePointer) -> SubscriptionHandle {
        let handle = SubscriptionHandle(pointer: subscription)
        handlers.withLock { $0.append(box) }
        subscriptions.withLock { $0.append(handle) }
        return handle
    }

    private static func data(of message: OpaquePointer) -> [UInt8] {
        let count = Int(natsMsg_GetDataLength(message))
        guard count > 0, let start = natsMsg_GetData(message) else { return [] }
        return [UInt8](UnsafeRawBufferPointer(start: start, count: count))
    }

    /// The C handler of every subscription: finds the Swift closure and frees the message.
    private static let callback: natsMsgHandler = { _, _, message, closure in
        guard let message, let closure else { return }
        Unmanaged<MessageHandlerBox>.fromOpaque(closure).takeUnretainedValue().handle(message)
        natsMsg_Destroy(message)
    }

    /// Reports the status only: the subscription may be one being reset or closed, and reading
    /// it (its subject) then touched freed memory.
    private static let errorCallback: natsErrHandler = { _, _, status, closure in
        guard let closure else { return }
        Unmanaged<ErrorHandlerBox>.fromOpaque(closure).takeUnretainedValue().handle(
            String(cString: natsStatus_GetText(status)))
    }
}

/// A libnats subscription; used only to close it.
struct SubscriptionHandle: @unchecked Sendable {
    fileprivate let pointer: OpaquePointer
}

/// The connection's error handler, kept alive by its client while libnats may call it.
private final class ErrorHandlerBox: Sendable {
    let handle: @Sendable (String) -> Void
    init(_ handle: @escaping @Sendable (String) -> Void) { self.handle = handle }
    var opaque: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }
}

/// A subscription's Swift handler, kept alive by its client while libnats may call it.
private final class MessageHandlerBox: @unchecked Sendable {
    let handle: (OpaquePointer) -> Void
    init(_ handle: @escaping (OpaquePointer) -> Void) { self.handle = handle }
    var opaque: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }
}

/// A JetStream key-value bucket (used for leases: create-if-absent, update-if-unchanged).
final class KeyValueBucket: @unchecked Sendable {
    private let store: OpaquePointer

    init(store: OpaquePointer) { self.store = store }

    deinit { kvStore_Destroy(store) }

    /// Puts the key only if it does not exist (or was deleted); returns its revision.
    func create(_ key: String, _ value: String) throws -> UInt64 {
        var revision: UInt64 = 0
        try check(kvStore_CreateString(&revision, store, key, value), "creating key \(key)")
        return revision
    }

    /// Puts the key only if its revision is still `last`; returns the new revision.
    func update(_ key: String, _ value: String, last: UInt64) throws -> UInt64 {
        var revision: UInt64 = 0
        try check(kvStore_UpdateString(&revision, store, key, value, last), "updating key \(key)")
        return revision
    }

    /// The key's value and revision, or nil when it has none (never set, deleted or expired).
    func get(_ key: String) throws -> (value: String, revision: UInt64)? {
        var entry: OpaquePointer?
        let status = kvStore_Get(&entry, store, key)
        if status == NATS_NOT_FOUND { return nil }
        guard status == NATS_OK, let entry else { throw NATSError("reading key \(key)", status) }
        defer { kvEntry_Destroy(entry) }
        return (kvEntry_ValueString(entry).map { String(cString: $0) } ?? "", kvEntry_Revision(entry))
    }

    func delete(_ key: String) {
        _ = kvStore_Delete(store, key)
    }
}

func check(_ status: natsStatus, _ what: String) throws {
    guard status == NATS_OK else { throw NATSError(what, status) }
}

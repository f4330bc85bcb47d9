import DiffcastConfiguration
import DiffcastEngine
import DiffcastServer

extension ServerConfiguration {
    /// What the server takes of the checked settings; the rest go to the store, the backbone and
    /// the logger.
    init(_ validated: ValidatedSettings) {
        let settings = validated.settings
        self.init(socketPath: settings.socket)
        tcpAddress = settings.tcp
        tcpToken = settings.tcpToken
        metricsAddress = settings.metrics
        httpAddress = settings.http
        httpOrigins = settings.httpOrigins
        streamLingerMilliseconds = UInt64(settings.streamLingerMs)
        streamHeartbeatMilliseconds = UInt64(settings.streamHeartbeatMs)
        ioThreads = settings.ioThreads
        maximumLineBytes = settings.maxLineBytes
        maximumUnsentBytes = settings.maxUnsentBytes
        tcpSendBufferBytes = settings.tcpSendBufferBytes
        // slow_subscriber_policy's choices are this type's raw values (DaemonSettingsTests).
        slowSubscriberPolicy = SlowSubscriberPolicy(rawValue: settings.slowSubscriberPolicy) ?? .catchUp
        coalesceWindowMilliseconds = settings.coalesceWindowMs
        history.versions = settings.historyVersions
        maximumConnections = settings.maxConnections
        backboneSnapshotEvery = settings.backboneSnapshotEvery
        limits = CollectionLimits(
            collections: settings.maxCollections, itemsPerCollection: settings.maxItemsPerCollection)
        publishers = validated.publishers
        subscribers = validated.subscribers
        tokenVerifier = validated.tokenVerifier
        anonymousRights = validated.anonymousRights
        maximumConnectionsPerSubject = settings.maxConnectionsPerSubject
        trustedProxies = settings.trustedProxies
    }
}

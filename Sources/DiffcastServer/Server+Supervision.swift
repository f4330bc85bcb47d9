import CLibUV
import DiffcastCore
import DiffcastEngine
import DiffcastHTTP
import DiffcastWire
import Glibc
import Logging

/// Reloading the configuration (SIGHUP), and what systemd and operators see: the status line,
/// the watchdog, heartbeats on event streams.
extension Server {
    // MARK: - Reloading

    /// Applies what can change while clients stay connected: limits, access lists, the token,
    /// the slow-subscriber policy. New line limits apply to new connections.
    func reload() {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let microseconds = UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
        systemd.notify("RELOADING=1\nMONOTONIC_USEC=\(microseconds)")
        defer { systemd.notify("READY=1\nSTATUS=\(statusLine())") }
        guard let new = reloadConfiguration?() else { return }
        configuration.maximumLineBytes = new.maximumLineBytes
        configuration.maximumUnsentBytes = new.maximumUnsentBytes
        configuration.slowSubscriberPolicy = new.slowSubscriberPolicy
        fanOut.policy = FanOut.Policy(configuration)
        configuration.maximumConnections = new.maximumConnections
        configuration.publishers = new.publishers
        configuration.subscribers = new.subscribers
        configuration.tcpToken = new.tcpToken
        configuration.tokenVerifier = new.tokenVerifier
        configuration.anonymousRights = new.anonymousRights
        configuration.maximumConnectionsPerSubject = new.maximumConnectionsPerSubject
        configuration.trustedProxies = new.trustedProxies
        reviewCredentialsAfterReload()
        configuration.limits = new.limits
        _ = applyQueue?.submit([.setLimits(new.limits)])
        logger.info("configuration reloaded")
    }

    // MARK: - Supervision

    /// Status for `systemctl status` every few seconds, and the watchdog ping when systemd asks
    /// for one. Both timers are unreferenced: they never keep the loop alive on their own.
    func startHousekeeping() throws {
        func every(_ milliseconds: UInt64, _ callback: @escaping uv_timer_cb) throws {
            let timer = LoopHandles.make(uv_timer_t.self, UV_TIMER)
            try check(uv_timer_init(loop, timer), "uv_timer_init", orDiscard: timer)
            housekeepingTimers.append(timer)
            try check(uv_timer_start(timer, callback, milliseconds, milliseconds), "uv_timer_start")
            uv_unref(dc_handle(timer))
        }
        // Tokens expire within a second, whenever a key set may be configured (a reload can add one).
        try every(1000) { timer in Server.from(timer)?.expireTokens() }
        if configuration.httpAddress != nil {
            try every(configuration.streamHeartbeatMilliseconds) { timer in Server.from(timer)?.sendHeartbeats() }
            if configuration.streamLingerMilliseconds > 0 {
                let timer = LoopHandles.make(uv_timer_t.self, UV_TIMER)
                try check(uv_timer_init(loop, timer), "uv_timer_init", orDiscard: timer)
                housekeepingTimers.append(timer)
                uv_unref(dc_handle(timer))
                lingerTimer = timer
            }
        }
        guard systemd.isSupervised else { return }
        try every(5000) { timer in
            guard let server = Server.from(timer) else { return }
            server.systemd.notify("STATUS=\(server.statusLine())")
        }
        if let interval = systemd.watchdogIntervalMilliseconds {
            try every(interval) { timer in Server.from(timer)?.systemd.notify("WATCHDOG=1") }
        }
    }

    func statusLine() -> String {
        let subscriptions = fanOut.subscriptionCount
        let serving =
            "serving \(fanOut.subscribedCollectionCount) subscribed collections, \(subscriptions) subscriptions, "
            + "\(connections.count) connections"
        guard let readOnlyReason else { return serving }
        return "read-only: disk full or failing (\(readOnlyReason)); " + serving
    }
}

import CNATS

/// How a daemon proves itself to the NATS cluster (one of user and password, a token, or a
/// `.creds` file of a JWT and its NKey seed), and the TLS it speaks: the cluster then lets in
/// only the daemons it knows, so no one else can write into the shared log.
public struct NATSCredentials: Sendable, Equatable {
    public var user: String?
    public var password: String?
    public var token: String?
    /// A `.creds` file (NATS decentralized auth: a user JWT and its NKey seed).
    public var credentialsFile: String?
    /// CA certificates the servers' certificates must chain to (TLS on).
    public var tlsCA: String?
    /// This daemon's certificate chain and key, for servers that verify clients.
    public var tlsCertificate: String?
    public var tlsKey: String?

    public init() {}

    func apply(to options: OpaquePointer?) throws {
        if let user { try check(natsOptions_SetUserInfo(options, user, password), "backbone_user") }
        if let token { try check(natsOptions_SetToken(options, token), "backbone_token") }
        if let credentialsFile {
            try check(natsOptions_SetUserCredentialsFromFiles(options, credentialsFile, nil), "backbone_creds")
        }
        if tlsCA != nil || tlsCertificate != nil {
            try check(natsOptions_SetSecure(options, true), "backbone TLS")
        }
        if let tlsCA { try check(natsOptions_LoadCATrustedCertificates(options, tlsCA), "backbone_tls_ca \(tlsCA)") }
        if let tlsCertificate {
            try check(
                natsOptions_LoadCertificatesChain(options, tlsCertificate, tlsKey),
                "backbone_tls_cert \(tlsCertificate)")
        }
    }
}

/// A libnats call that failed: its status, JetStream's error code when the server gave one, and
/// the library's own text for it.
public struct NATSError: Error, CustomStringConvertible {
    public let what: String
    public let status: natsStatus
    /// JetStream's error code (10071 "wrong last sequence", 10037 "no message found"), or 0.
    public let code: Int
    public let text: String

    init(_ what: String, _ status: natsStatus, code: jsErrCode = jsErrCode(0)) {
        self.what = what
        self.status = status
        self.code = Int(code.rawValue)
        var lastStatus = NATS_OK
        let last = nats_GetLastError(&lastStatus).map { String(cString: $0) } ?? ""
        self.text = last.isEmpty ? String(cString: natsStatus_GetText(status)) : last
    }

    /// Another writer appended to the subject since we last read it (the server's fence).
    public var isWrongLastSequence: Bool {
        code == Int(JSStreamWrongLastSequenceErr.rawValue) || text.contains("wrong last sequence")
    }

    /// The request may or may not have taken effect: nobody answered in time, or no stream
    /// leader was there to answer (an election is under way).
    public var isAmbiguous: Bool {
        status == NATS_TIMEOUT || status == NATS_NO_RESPONDERS || status == NATS_CONNECTION_CLOSED
            || status == NATS_CONNECTION_DISCONNECTED
    }

    public var description: String {
        code == 0 ? "\(what): \(text)" : "\(what): \(text) (JetStream error \(code))"
    }
}

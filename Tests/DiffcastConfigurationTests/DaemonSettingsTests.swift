import DiffcastAccess
import DiffcastServer
import DiffcastStorage
import DiffcastWire
import Foundation
import Logging
import Testing

@testable import DiffcastConfiguration

@Suite struct DaemonSettingsTests {
    static let shippedFile = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("config/diffcastd.yaml")

    @Test func theShippedFileHoldsExactlyTheEmbeddedDefaults() throws {
        let text = try String(contentsOf: Self.shippedFile, encoding: .utf8)
        let settings = try DaemonSettings.load(yaml: text, from: "diffcastd.yaml")
        #expect(settings == DaemonSettings())
        _ = try ValidatedSettings(settings)
        // Every key appears in the file, in the table's order, and its comment says "Restart."
        // exactly when a reload does not apply it.
        #expect(DaemonSettings.keys.count > 40 && DaemonSettings.keys.contains("stream_heartbeat_ms"))
        var comment: [Substring] = []
        var documented: [(key: String, restart: Bool)] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("#") {
                comment.append(line)
            } else if let colon = line.firstIndex(of: ":") {
                // Keys listed one after another share the comment above the first.
                let restart =
                    comment.isEmpty ? documented.last?.restart ?? false : comment.joined().contains("Restart.")
                documented.append((String(line[..<colon]), restart))
                comment = []
            } else {
                comment = []
            }
        }
        #expect(documented.map(\.key) == DaemonSettings.keys)
        for (setting, entry) in zip(DaemonSettings.all, documented) {
            #expect(
                entry.restart == (setting.applies == .afterRestart), "\(setting.key): the file's comment says otherwise"
            )
        }
    }

    /// A value each setting accepts that is not its default.
    static func otherValue(of setting: Setting) -> (yaml: String, option: String) {
        let defaults = DaemonSettings()
        switch setting.value {
        case .integer(let path, let range):
            let value = defaults[keyPath: path] == range.lowerBound ? range.lowerBound + 1 : range.lowerBound
            return ("\(value)", "\(value)")
        case .choice(let path, let choices):
            let value = choices.first { $0 != defaults[keyPath: path] } ?? ""
            return (value, value)
        case .text, .optionalText(_, .any), .optionalText(_, .nonEmpty): return ("/elsewhere", "/elsewhere")
        case .optionalText(_, .address): return ("127.0.0.1:9", "127.0.0.1:9")
        case .list: return ("[a, b]", "a,b")
        case .flag(let path): return ("\(!defaults[keyPath: path])", "\(!defaults[keyPath: path])")
        case .rights: return ("{read: [a]}", #"{"read":["a"]}"#)
        }
    }

    /// The values of a configuration, one per stored property.
    static func values(_ settings: DaemonSettings) -> [String] {
        Mirror(reflecting: settings).children.map { "\($0.value)" }
    }

    @Test func eachSettingIsOnePropertyThatItsKeyAndItsOptionSetAlike() throws {
        let defaults = DaemonSettings()
        #expect(Self.values(defaults).count == DaemonSettings.all.count, "a property no setting describes")
        #expect(Set(DaemonSettings.keys).count == DaemonSettings.all.count)
        for setting in DaemonSettings.all {
            let value = Self.otherValue(of: setting)
            let byFile = try DaemonSettings.load(yaml: "\(setting.key): \(value.yaml)\n", from: "f.yaml")
            var byOption = DaemonSettings()
            try byOption.apply(options: [setting.option, value.option])
            var byOptionWithEquals = DaemonSettings()
            try byOptionWithEquals.apply(options: ["\(setting.option)=\(value.option)"])
            #expect(byFile == byOption && byOption == byOptionWithEquals, "\(setting.key)")
            let changed = zip(Self.values(defaults), Self.values(byFile)).count { $0 != $1 }
            #expect(changed == 1, "\(setting.key) set \(changed) properties")
            #expect(setting.shown(in: byFile) != setting.shown(in: defaults), "\(setting.key)")
            let restart = DaemonSettings.changesNeedingRestart(from: defaults, to: byFile)
            #expect(restart == (setting.applies == .afterRestart ? [setting.key] : []), "\(setting.key)")
        }
    }

    @Test func theChoicesAreTheNamesTheDaemonKnows() {
        func choices(_ key: String) -> [String] {
            guard case .choice(_, let choices) = DaemonSettings.all.first(where: { $0.key == key })?.value else {
                return []
            }
            return choices
        }
        #expect(choices("log_level") == Logger.Level.allCases.map(\.rawValue))
        #expect(choices("sync") == SyncPolicy.allCases.map(\.rawValue))
        #expect(choices("slow_subscriber_policy") == ServerConfiguration.SlowSubscriberPolicy.allCases.map(\.rawValue))
    }

    @Test func badOptionsAreNamed() {
        for (arguments, named) in [
            (["--max-conections", "5"], "unknown option '--max-conections'"),
            (["--max-line-bytes"], "--max-line-bytes: expected a value"),
            (["--max-line-bytes", "lots"], "--max-line-bytes: expected a whole number, got 'lots'"),
            (["--backbone-owner=maybe"], "--backbone-owner: expected true or false, got 'maybe'"),
            (["stray"], "unexpected argument 'stray'"),
        ] {
            var settings = DaemonSettings()
            do {
                try settings.apply(options: arguments)
                Issue.record("\(arguments) were accepted")
            } catch {
                #expect(error.description.hasPrefix(named), "\(error)")
            }
            #expect(settings == DaemonSettings(), "\(arguments) changed a setting")
        }
    }

    @Test func theHelpListsEveryOptionWithItsDefault() {
        let help = DaemonSettings.optionsHelp
        for setting in DaemonSettings.all {
            #expect(
                help.contains("\n  \(setting.option) <") || help.hasPrefix("  \(setting.option) <"), "\(setting.key)")
        }
        let words = help.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        #expect(words.contains("Longest request line in bytes. (max_line_bytes: 16777216; SIGHUP applies it)"))
        #expect(words.contains("(tcp: null)"))
        #expect(help.split(separator: "\n").allSatisfy { $0.count <= 80 })
    }

    @Test func anUnknownKeyIsNamed() {
        #expect(throws: SettingsError.self) { try DaemonSettings.load(yaml: "max_conections: 5\n", from: "f.yaml") }
        do {
            _ = try DaemonSettings.load(yaml: "log_level: info\nmax_conections: 5\n", from: "f.yaml")
            Issue.record("an unknown key after a known one was accepted")
        } catch {
            #expect(error.description.contains("unknown key 'max_conections'"))
        }
    }

    /// Why a file's settings are refused, by the file's reading or by the checks; nil when they
    /// are accepted.
    static func refusal(_ yaml: String) -> String? {
        do {
            _ = try ValidatedSettings(try DaemonSettings.load(yaml: yaml, from: "f.yaml"))
            return nil
        } catch {
            return error.description
        }
    }

    @Test func aBadValueIsNamed() throws {
        #expect(Self.refusal("max_line_bytes: lots\n")?.contains("max_line_bytes") == true)
        let small = try DaemonSettings.load(yaml: "max_line_bytes: 10\n", from: "f.yaml")
        #expect(throws: SettingsError.self) { try ValidatedSettings(small) }
        #expect(Self.refusal("sync: sometimes\n")?.contains("sync") == true)
        for (key, value) in [
            ("stream_heartbeat_ms", 99), ("stream_heartbeat_ms", 3_600_001), ("stream_linger_ms", 1001),
        ] {
            #expect(Self.refusal("\(key): \(value)\n")?.contains(key) == true, "\(key): \(value)")
        }
        let beating = try ValidatedSettings(try DaemonSettings.load(yaml: "stream_heartbeat_ms: 250\n", from: "f.yaml"))
        #expect(beating.settings.streamHeartbeatMs == 250)
        for (yaml, named) in [
            (
                "log_level: loud\n",
                "log_level: expected trace, debug, info, notice, warning, error or critical, got 'loud'"
            ),
            ("max_unsent_bytes: 1023\n", "max_unsent_bytes: at least 1024, got 1023"),
            ("io_threads: 65\n", "io_threads: 1 to 64, got 65"),
            ("metrics: 9464\n", "metrics: expected IP:PORT (e.g. 127.0.0.1:9464), got '9464'"),
            ("tcp_token: ''\n", "tcp_token: must not be empty"),
        ] {
            #expect(Self.refusal(yaml) == named)
        }
        #expect(throws: SettingsError.self) { try DaemonSettings.load(yaml: "publishers: uid:0\n", from: "f.yaml") }
        #expect(throws: SettingsError.self) { try DaemonSettings.load(yaml: "backbone_owner: 3\n", from: "f.yaml") }
    }

    @Test func aBackboneIsCheckedAndTakesOverFromTheStateDirectory() throws {
        #expect(Self.refusal("backbone: 127.0.0.1:4222\n")?.contains("backbone: expected nats://HOST:PORT") == true)
        let yaml = "backbone: nats://a:4222, nats://b:4222\nstate_dir: /var/lib/diffcast\nbackbone_owner: false\n"
        let validated = try ValidatedSettings(try DaemonSettings.load(yaml: yaml, from: "f.yaml"))
        #expect(validated.backbone?.servers == ["nats://a:4222", "nats://b:4222"])
        #expect(validated.backbone?.mayOwn == false)
        #expect(validated.stateDirectory == nil)
        #expect(validated.notices.contains { $0.contains("state_dir /var/lib/diffcast is not used") })
        let alone = try ValidatedSettings(try DaemonSettings.load(yaml: "state_dir: /d\n", from: "f.yaml"))
        #expect(alone.backbone == nil && alone.stateDirectory == "/d" && alone.notices.isEmpty)
    }

    @Test func aPartialFileKeepsTheOtherDefaults() throws {
        let settings = try DaemonSettings.load(yaml: "max_collections: 7\npublishers: [uid:0]\n", from: "f.yaml")
        #expect(settings.maxCollections == 7 && settings.publishers == ["uid:0"])
        #expect(settings.maxLineBytes == DaemonSettings().maxLineBytes)
        let validated = try ValidatedSettings(settings)
        #expect(validated.publishers.userIDs == [0] && validated.subscribers.allowsEveryone)
    }

    @Test func anonymousRightsAreAMappingOrItsJSONAndBadOnesAreNamed() throws {
        let mapping = try ValidatedSettings(
            try DaemonSettings.load(yaml: "auth_anonymous: {read: [public.>]}\n", from: "f.yaml"))
        #expect(mapping.anonymousRights.read.contains("public.scores"))
        #expect(!mapping.anonymousRights.read.contains("inbox.alice"))
        #expect(mapping.anonymousRights.write.isEmpty)
        let json = try ValidatedSettings(
            try DaemonSettings.load(yaml: "auth_anonymous: '{\"write\":[\"a.*\"]}'\n", from: "f.yaml"))
        #expect(json.anonymousRights.write.contains("a.b"))
        for (yaml, named) in [
            ("auth_anonymous: '{\"read\":[\"a.>.b\"]}'\n", "auth_anonymous"),
            ("auth_anonymous: '{\"raed\":[\"a\"]}'\n", "auth_anonymous"),
            ("auth_audience: diffcast\n", "auth_audience"),
            ("auth_keys: /nonexistent/keys.json\n", "auth_keys"),
            ("auth_leeway_s: -1\n", "auth_leeway_s"),
            ("max_connections_per_subject: 0\n", "max_connections_per_subject"),
        ] {
            let refusal = Self.refusal(yaml)
            #expect(refusal?.contains(named) == true, "\(yaml): \(refusal ?? "accepted")")
        }
    }

    @Test func aKeySetLetsHTTPListenBeyondLoopback() throws {
        let keys = FileManager.default.temporaryDirectory.appendingPathComponent("keys-\(getpid()).json")
        try Data(#"{"keys":[{"kty":"oct","k":"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8"}]}"#.utf8).write(to: keys)
        defer { try? FileManager.default.removeItem(at: keys) }
        #expect(throws: SettingsError.self) {
            try ValidatedSettings(try DaemonSettings.load(yaml: "http: 0.0.0.0:8080\n", from: "f.yaml"))
        }
        let validated = try ValidatedSettings(
            try DaemonSettings.load(yaml: "http: 0.0.0.0:8080\nauth_keys: \(keys.path)\n", from: "f.yaml"))
        #expect(validated.tokenVerifier?.keys.keys.first?.algorithm == "HS256")
    }
}

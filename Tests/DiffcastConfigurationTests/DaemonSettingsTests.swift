import DiffcastAccess
import DiffcastConfiguration
import DiffcastServer
import DiffcastWire
import Foundation
import Testing

@Suite struct DaemonSettingsTests {
    static let shippedFile = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("config/diffcastd.yaml")

    @Test func theShippedFileHoldsExactlyTheEmbeddedDefaults() throws {
        let text = try String(contentsOf: Self.shippedFile, encoding: .utf8)
        let settings = try DaemonSettings.load(yaml: text, from: "diffcastd.yaml")
        #expect(settings == DaemonSettings())
        _ = try ValidatedSettings(settings)
        // Every key appears in the file, so every option is documented there.
        #expect(DaemonSettings.keys.count > 40 && DaemonSettings.keys.contains("stream_heartbeat_ms"))
        for key in DaemonSettings.keys {
            #expect(text.contains("\n\(key): "), "\(key) is not in the shipped file")
        }
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

    @Test func aBadValueIsNamed() throws {
        do {
            _ = try DaemonSettings.load(yaml: "max_line_bytes: lots\n", from: "f.yaml")
            Issue.record("a string for an integer was accepted")
        } catch {
            #expect(error.description.contains("max_line_bytes"))
        }
        let small = try DaemonSettings.load(yaml: "max_line_bytes: 10\n", from: "f.yaml")
        #expect(throws: SettingsError.self) { try ValidatedSettings(small) }
        do {
            _ = try ValidatedSettings(try DaemonSettings.load(yaml: "sync: sometimes\n", from: "f.yaml"))
            Issue.record("sync: sometimes was accepted")
        } catch {
            #expect(error.description.contains("sync"))
        }
        for (key, value) in [
            ("stream_heartbeat_ms", 99), ("stream_heartbeat_ms", 3_600_001), ("stream_linger_ms", 1001),
        ] {
            do {
                _ = try ValidatedSettings(try DaemonSettings.load(yaml: "\(key): \(value)\n", from: "f.yaml"))
                Issue.record("\(key): \(value) was accepted")
            } catch {
                #expect(error.description.contains(key))
            }
        }
        let beating = try ValidatedSettings(try DaemonSettings.load(yaml: "stream_heartbeat_ms: 250\n", from: "f.yaml"))
        #expect(beating.server.streamHeartbeatMilliseconds == 250)
    }

    @Test func aBackboneIsCheckedAndTakesOverFromTheStateDirectory() throws {
        do {
            _ = try ValidatedSettings(try DaemonSettings.load(yaml: "backbone: 127.0.0.1:4222\n", from: "f.yaml"))
            Issue.record("a backbone without nats:// was accepted")
        } catch {
            #expect(error.description.contains("backbone: expected nats://HOST:PORT"))
        }
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
        #expect(validated.server.limits.collections == 7)
        #expect(validated.server.publishers.userIDs == [0])
    }

    @Test func anonymousRightsAreAMappingOrItsJSONAndBadOnesAreNamed() throws {
        let mapping = try ValidatedSettings(
            try DaemonSettings.load(yaml: "auth_anonymous: {read: [public.>]}\n", from: "f.yaml"))
        #expect(mapping.server.anonymousRights.read.contains("public.scores"))
        #expect(!mapping.server.anonymousRights.read.contains("inbox.alice"))
        #expect(mapping.server.anonymousRights.write.isEmpty)
        let json = try ValidatedSettings(
            try DaemonSettings.load(yaml: "auth_anonymous: '{\"write\":[\"a.*\"]}'\n", from: "f.yaml"))
        #expect(json.server.anonymousRights.write.contains("a.b"))
        for (yaml, named) in [
            ("auth_anonymous: '{\"read\":[\"a.>.b\"]}'\n", "auth_anonymous"),
            ("auth_anonymous: '{\"raed\":[\"a\"]}'\n", "auth_anonymous"),
            ("auth_audience: diffcast\n", "auth_audience"),
            ("auth_keys: /nonexistent/keys.json\n", "auth_keys"),
            ("auth_leeway_s: -1\n", "auth_leeway_s"),
            ("max_connections_per_subject: 0\n", "max_connections_per_subject"),
        ] {
            do {
                _ = try ValidatedSettings(try DaemonSettings.load(yaml: yaml, from: "f.yaml"))
                Issue.record("\(yaml) was accepted")
            } catch {
                #expect("\(error)".contains(named), "\(yaml): \(error)")
            }
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
        #expect(validated.server.tokenVerifier?.keys.keys.first?.algorithm == "HS256")
    }
}

import ArgumentParser
import DiffcastAccess
import DiffcastWire
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// What scoped access costs: one token's verification per algorithm (in process, the key set
/// and tokens of Tests/Vectors/tokens.json, made by PyJWT), and many connections presenting a
/// token at once to the release daemon. The feed with tokens against without is
/// `feed --scoped`.
struct AuthBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "auth", abstract: "Token verification per algorithm, and connections authenticating at once.")

    @Option(help: "Verifications per algorithm and round.")
    var verifications = 2000

    @Option(help: "Rounds; the table gives the median.")
    var rounds = 5

    @Option(help: "Connections that authenticate at once (the daemon may hold ~19,000 here).")
    var connections = 10_000

    @Option(help: "The token vectors (a key set and tokens of every algorithm).")
    var vectors = "Tests/Vectors/tokens.json"

    func run() throws {
        raiseFileLimit()
        guard let data = FileManager.default.contents(atPath: vectors),
            let object = try JSONSerialization.jsonObject(with: data) as? [String: Any],
            let tokens = object["tokens"] as? [String: String], let jwks = object["jwks"]
        else { throw BenchmarkError("cannot read \(vectors) (run from the repository's root)") }
        let keySet = try JSONSerialization.data(withJSONObject: jwks)
        let verifier = TokenVerifier(keys: try KeySet.parse(json: Array(keySet), source: vectors))
        let now = Date().timeIntervalSince1970
        emit("## Scoped access: one token verified (in process), median of \(rounds) rounds\n")
        emit("| algorithm | µs per verification |")
        emit("|---|---:|")
        for (name, algorithm) in [("hs", "HS256"), ("rs", "RS256"), ("es", "ES256"), ("ed", "EdDSA")] {
            guard let token = tokens[name] else { continue }
            var perRound: [Double] = []
            for _ in 0..<rounds {
                let start = ContinuousClock.now
                for _ in 0..<verifications { _ = try verifier.verify(token, now: now) }
                perRound.append(seconds(since: start) / Double(verifications))
            }
            emit(String(format: "| %@ | %.1f |", algorithm, median(perRound) * 1e6))
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("dc-auth-\(getpid())").path
        mkdir(directory, 0o755)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let keyFile = directory + "/keys.json"
        _ = FileManager.default.createFile(atPath: keyFile, contents: keySet)
        emit("\n## \(connections) connections presenting a token at once (release diffcastd, Unix socket)\n")
        emit("| algorithm | seconds until every auth is answered | µs of the loop per auth |")
        emit("|---|---:|---:|")
        for (name, algorithm) in [("hs", "HS256"), ("es", "ES256")] {
            guard let token = tokens[name] else { continue }
            let elapsed = try authenticateAtOnce(token: token, keyFile: keyFile, directory: directory)
            emit(String(format: "| %@ | %.2f | %.1f |", algorithm, elapsed, elapsed / Double(connections) * 1e6))
        }
    }

    /// Opens every connection, then sends every `auth` before reading any answer; the time from
    /// the first send to the last answer.
    private func authenticateAtOnce(token: String, keyFile: String, directory: String) throws -> Double {
        let path = directory + "/d.sock"
        let server = try ServerProcess.diffcastd(
            socketPath: path,
            arguments: [
                "--auth-keys", keyFile, "--max-connections-per-subject", "\(connections + 1)",
                "--max-connections", "\(connections + 10)",
            ])
        defer { server.stop() }
        var sockets: [UnixSocket] = []
        for _ in 0..<connections { sockets.append(try UnixSocket(path: path)) }
        defer { for socket in sockets { socket.close() } }
        let line = Array("{\"op\":\"auth\",\"token\":\"\(token)\"}\n".utf8)
        let start = ContinuousClock.now
        for socket in sockets { try socket.send(line) }
        for socket in sockets {
            guard let answer = socket.readLine(), firstIndex(of: Array("\"ok\":true".utf8), in: answer) != nil else {
                throw BenchmarkError("an auth was refused")
            }
        }
        return seconds(since: start)
    }
}

/// A daemon that verifies capability tokens, and a token that may read and write the feed:
/// HS256, made here from a key the benchmark writes.
struct ScopedAccess {
    let arguments: [String]
    let token: String

    init(directory: String) throws {
        let secret = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8"
        let key = #"{"kty":"oct","kid":"bench","alg":"HS256","k":"\#(secret)"}"#
        let keyFile = directory + "/bench-keys.json"
        _ = FileManager.default.createFile(atPath: keyFile, contents: Data(#"{"keys":[\#(key)]}"#.utf8))
        let feed = CollectionScope([try CollectionPattern(parsing: "feed")])
        let now = Date().timeIntervalSince1970
        let claims = TokenMinter.Claims(
            subject: "bench", rights: Rights(read: feed, write: feed), issuedAt: now, expiresAt: now + 3600)
        token = try TokenMinter.mintWaiting(claims, keyJSON: Array(key.utf8))
        arguments = ["--auth-keys", keyFile, "--max-connections-per-subject", "100000"]
    }
}

import ArgumentParser
import DiffcastAccess
import DiffcastWire
import Foundation

/// `diffcast token`: mints a capability token from a private JSON Web Key, for scripts and
/// tests (a team's backend mints its users' tokens with its own JOSE library the same way).
struct Token: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Mint a capability token (a JWT) from a private JSON Web Key.",
        discussion: """
            Prints a token signed with the key (a JWK: oct for HS256, RSA, EC P-256 or OKP \
            Ed25519 with its private part "d"), whose diffcast claim names the collections its \
            holder may read, write and drop. Patterns: '*' matches one name token, a last '>' \
            the rest ('news.>' matches news.eu and news.eu.fr).

              $ diffcast token --key key.jwk --sub alice --read inbox.alice --write inbox.alice --ttl 15m
            """)

    @Option(help: ArgumentHelp("The private JSON Web Key that signs.", valueName: "file"))
    var key: String

    @Option(help: "The holder's name (sub): logs and the per-holder connection limit.")
    var sub: String?

    @Option(parsing: .singleValue, help: "A pattern of collections the holder may read (repeatable).")
    var read: [String] = []

    @Option(parsing: .singleValue, help: "A pattern of collections the holder may write (repeatable).")
    var write: [String] = []

    @Option(parsing: .singleValue, help: "A pattern of collections the holder may drop (repeatable).")
    var drop: [String] = []

    @Flag(help: "Every right, stats included (an operator's token).")
    var admin = false

    @Option(help: "How long the token lasts: N, Ns, Nm, Nh or Nd.")
    var ttl = "15m"

    @Option(help: "The audience (aud) to name.")
    var aud: String?

    @Option(help: "The issuer (iss) to name.")
    var iss: String?

    func run() async throws {
        guard let seconds = Self.seconds(ttl), seconds > 0 else {
            throw ValidationError("--ttl wants N, Ns, Nm, Nh or Nd (e.g. 15m), not '\(ttl)'")
        }
        var rights = Rights(admin: admin)
        do {
            rights.read = CollectionScope(
                try read.map { pattern throws(PatternError) in try CollectionPattern(parsing: pattern) })
            rights.write = CollectionScope(
                try write.map { pattern throws(PatternError) in try CollectionPattern(parsing: pattern) })
            rights.drop = CollectionScope(
                try drop.map { pattern throws(PatternError) in try CollectionPattern(parsing: pattern) })
        } catch {
            throw ValidationError("\(error)")
        }
        guard let keyData = FileManager.default.contents(atPath: key) else {
            throw ValidationError("--key: cannot read \(key)")
        }
        let now = Date().timeIntervalSince1970
        var claims = TokenMinter.Claims(subject: sub, rights: rights, issuedAt: now, expiresAt: now + seconds)
        claims.audience = aud
        claims.issuer = iss
        do {
            print(try await TokenMinter.mint(claims, keyJSON: Array(keyData)))
        } catch {
            FileHandle.standardError.write(Data("diffcast token: \(key): \(error)\n".utf8))
            throw ExitCode(1)
        }
    }

    /// `90`, `90s`, `15m`, `2h`, `7d` in seconds.
    static func seconds(_ text: String) -> Double? {
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86400]
        if let last = text.last, let unit = units[last] {
            return Double(text.dropLast()).map { $0 * unit }
        }
        return Double(text)
    }
}

import DiffcastWire
import Dispatch
import ExtrasBase64
import FoundationEssentials
import JWTKit

/// The keys tokens are verified against: a JSON Web Key Set (RFC 7517) read from the file that
/// `auth_keys` names. Each key is for exactly one algorithm (its `alg`, or the one its type and
/// curve allow: `oct` HS256, `RSA` RS256, `EC` P-256 ES256, `OKP` Ed25519 EdDSA), so that a
/// token is checked only with a key of its own `alg`: an HMAC token never meets a public key.
///
/// Signatures are checked by JWTKit (on swift-crypto); this type only says which key checks
/// which token.
public struct KeySet: Sendable, Equatable {
    /// One verification key.
    public struct Key: Sendable {
        /// The key's `kid`, when the set names one.
        public let identifier: String?
        /// The JWS algorithm the key is for (`HS256`, `RS256`, `ES256`, `EdDSA`).
        public let algorithm: String
        let verifier: any JWTAlgorithm
    }

    public let keys: [Key]
    /// The set's JSON text: two sets are the same when their texts are.
    let source: [UInt8]

    public static func == (left: KeySet, right: KeySet) -> Bool { left.source == right.source }

    /// The algorithms a key set may hold.
    public static let supportedAlgorithms = ["HS256", "RS256", "ES256", "EdDSA"]

    /// Reads a key set from its JSON text; an unusable key is an error naming it (by `kid` or
    /// place) and why. `source` names the file in messages.
    public init(json: [UInt8], source: String) async throws(KeySetError) {
        let document: JSONValue
        do {
            document = try JSONParser.parse(json, maximumDepth: 16)
        } catch {
            throw KeySetError("\(source): not JSON (\(error.message))")
        }
        guard case .array(let entries)? = document["keys"] else {
            throw KeySetError("\(source): expected a JSON Web Key Set, {\"keys\": [...]}")
        }
        var keys: [Key] = []
        for (index, entry) in entries.enumerated() {
            let name = "\(source): keys[\(index)]"
            keys.append(try await Self.key(from: entry, named: name))
        }
        guard !keys.isEmpty else { throw KeySetError("\(source): the key set holds no key") }
        self.keys = keys
        self.source = json
    }

    /// Reads the key set in a file.
    public static func load(path: String) async throws(KeySetError) -> KeySet {
        guard let bytes = FileBytes.read(path) else {
            throw KeySetError("cannot read \(path)")
        }
        return try await KeySet(json: bytes, source: path)
    }

    /// `init(json:source:)`, waited for (see `loadWaiting`).
    public static func parse(json: [UInt8], source: String) throws(KeySetError) -> KeySet {
        do {
            return try blocking { try await KeySet(json: json, source: source) }
        } catch let error as KeySetError {
            throw error
        } catch {
            throw KeySetError("\(source): \(error)")
        }
    }

    /// `load`, waited for: for the daemon's start and SIGHUP, which run on the loop's thread,
    /// outside Swift concurrency. Never call it from a task: it blocks its thread until the
    /// key set is made on another.
    public static func loadWaiting(path: String) throws(KeySetError) -> KeySet {
        do {
            return try blocking { try await load(path: path) }
        } catch let error as KeySetError {
            throw error
        } catch {
            throw KeySetError("\(path): \(error)")
        }
    }

    /// The keys that may check a token of `algorithm` naming `identifier` (its `kid`): the key
    /// with that `kid` when one is named, else every key of the algorithm.
    func candidates(algorithm: String, identifier: String?) -> [Key] {
        keys.filter { key in
            key.algorithm == algorithm && (identifier == nil || key.identifier == identifier)
        }
    }

    func holds(identifier: String) -> Bool {
        keys.contains { $0.identifier == identifier }
    }

    private static func key(from entry: JSONValue, named name: String) async throws(KeySetError) -> Key {
        guard case .object = entry, case .string(let type)? = entry["kty"] else {
            throw KeySetError("\(name): a key is an object with \"kty\"")
        }
        var identifier: String?
        if let kid = entry["kid"] {
            guard case .string(let text) = kid, !text.isEmpty else {
                throw KeySetError("\(name): kid must be a string")
            }
            identifier = text
        }
        let label = identifier.map { "\(name) (kid '\($0)')" } ?? name
        if case .string(let use)? = entry["use"], use != "sig" {
            throw KeySetError("\(label): use '\(use)' is not for signatures")
        }
        let curve: String? = if case .string(let text)? = entry["crv"] { text } else { nil }
        let implied: String
        switch (type, curve) {
        case ("oct", _): implied = "HS256"
        case ("RSA", _): implied = "RS256"
        case ("EC", "P-256"): implied = "ES256"
        case ("OKP", "Ed25519"): implied = "EdDSA"
        default:
            throw KeySetError(
                "\(label): kty '\(type)'\(curve.map { " crv '\($0)'" } ?? "") is not supported "
                    + "(oct, RSA, EC P-256, OKP Ed25519)")
        }
        var algorithm = implied
        if let given = entry["alg"] {
            guard case .string(let text) = given else { throw KeySetError("\(label): alg must be a string") }
            guard text == implied else {
                throw KeySetError(
                    "\(label): alg '\(text)' does not fit kty '\(type)' (expected \(implied); supported: "
                        + "\(supportedAlgorithms.joined(separator: ", ")))")
            }
            algorithm = text
        }
        let verifier: any JWTAlgorithm
        do {
            verifier = try await makeVerifier(entry, type: type, algorithm: algorithm)
        } catch let error as KeySetError {
            throw KeySetError("\(label): \(error.description)")
        } catch {
            throw KeySetError("\(label): not a usable \(type) key (\(error))")
        }
        guard verifier.name == algorithm else {
            throw KeySetError("\(label): the key is for \(verifier.name), not \(algorithm)")
        }
        return Key(identifier: identifier, algorithm: algorithm, verifier: verifier)
    }

    /// JWTKit's verifier for one key, made through a collection of that key alone (JWTKit keeps
    /// its signers behind `JWTKeyCollection`).
    private static func makeVerifier(_ entry: JSONValue, type: String, algorithm: String) async throws
        -> any JWTAlgorithm
    {
        let collection = JWTKeyCollection()
        let kid = JWKIdentifier(string: "key")
        if type == "oct" {
            guard case .string(let secret)? = entry["k"],
                let bytes = try? Base64.decode(string: secret, options: [.base64UrlAlphabet, .omitPaddingCharacter]),
                bytes.count >= 32
            else {
                throw KeySetError("an oct key needs \"k\": at least 32 bytes, base64url")
            }
            await collection.add(hmac: HMACKey(from: bytes), digestAlgorithm: .sha256, kid: kid)
        } else {
            // JWTKit reads RSA, EC and OKP keys from their JWK form; the `kid` is the
            // collection's own, the `alg` the one checked above.
            guard case .object(var members) = entry else { throw KeySetError("a key is an object") }
            members.removeAll { $0.key == "kid" || $0.key == "alg" }
            members += [.init("kid", .string(kid.string)), .init("alg", .string(algorithm))]
            var output = JSONOutput()
            output.append(.object(members))
            let jwk = try JSONDecoder().decode(JWK.self, from: Data(output.bytes))
            try await collection.add(jwk: jwk)
        }
        return try await collection.getKey(for: kid, alg: algorithm)
    }
}

/// A key set that cannot be used, with the file, the key and the reason.
public struct KeySetError: Error, CustomStringConvertible {
    public let description: String

    public init(_ description: String) {
        self.description = description
    }
}

/// Runs async work to its end from synchronous code (loading keys at start and on SIGHUP):
/// JWTKit builds its signers inside an actor. The work runs on a queue of its own (a task
/// executor preference, which JWTKit's default actors follow), never on Swift's cooperative
/// threads, so waiting for it cannot starve them even when the caller is one of them.
func blocking<T: Sendable>(_ work: @escaping @Sendable () async throws -> T) throws -> T {
    let outcome = BlockingOutcome<T>()
    let done = DispatchSemaphore(value: 0)
    Task(executorPreference: BlockingExecutor.shared) {
        do {
            outcome.result = .success(try await work())
        } catch {
            outcome.result = .failure(error)
        }
        done.signal()
    }
    done.wait()
    guard let result = outcome.result else { throw KeySetError("the key could not be made") }
    return try result.get()
}

/// A serial Dispatch queue as a task executor: where `blocking` runs its work.
private final class BlockingExecutor: TaskExecutor {
    static let shared = BlockingExecutor()
    private let queue = DispatchQueue(label: "diffcast.access.blocking")

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }
}

/// The result `blocking` waits for: written by its task before the semaphore is signalled,
/// read after the wait, so never by two threads at once.
private final class BlockingOutcome<T>: @unchecked Sendable {
    var result: Result<T, any Error>?
}

/// Reads a whole file as bytes.
enum FileBytes {
    static func read(_ path: String) -> [UInt8]? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        return Array(data)
    }
}

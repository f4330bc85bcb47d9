import ArgumentParser
import DiffcastClient
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// `diffcast sub --state FILE`: the verified mirrors of followed collections, kept in FILE so that
/// the next `sub` resumes from them with one changeset instead of a snapshot.
///
/// FILE holds one line per collection: a snapshot event in the daemon's own form (collection,
/// epoch, version, sections, digest), so it is checked like one when it is read. It is rewritten
/// whole (a temporary file renamed over it) after each version, so it always holds a complete,
/// verified version; lines of collections that this `sub` does not follow are kept as they are.
/// Only its owner may read it (mode 0600): it holds what the daemon let this user read.
struct StateFile {
    let path: String
    /// Each collection's line (a snapshot event, `\n` included), by name.
    private var lines: [String: [UInt8]] = [:]
    /// The lines read from FILE, parsed, until `takeMirrors` takes them.
    private var events: [String: JSONValue] = [:]

    /// Reads FILE; an absent or empty file holds no mirrors. Throws (a usage error) when FILE is
    /// something else than mirrors, so that a mistyped path never overwrites another file.
    init(path: String) throws {
        self.path = path
        guard let content = FileManager.default.contents(atPath: path) else {
            guard !FileManager.default.fileExists(atPath: path) else { throw ValidationError("cannot read \(path)") }
            return
        }
        for (number, line) in content.split(separator: UInt8(ascii: "\n")).enumerated() {
            let event = try? JSONParser.parse(Array(line))
            guard case .string("snapshot") = event?["event"], case .string(let name) = event?["collection"] else {
                throw ValidationError(
                    "\(path) is not a diffcast state file (line \(number + 1) is not a snapshot of a collection); "
                        + "remove it or name another --state file")
            }
            lines[name] = Array(line) + [UInt8(ascii: "\n")]
            events[name] = event
        }
    }

    /// The mirrors of the named collections that FILE held when it was read, each verified (its
    /// digest, its shape) or the reason it is not. Forgets what was read: call it once.
    mutating func takeMirrors(of names: [String]) -> [String: Result<CollectionMirror, CollectionMirror.Divergence>] {
        defer { events = [:] }
        var mirrors: [String: Result<CollectionMirror, CollectionMirror.Divergence>] = [:]
        for name in names {
            guard let event = events[name] else { continue }
            var mirror = CollectionMirror()
            mirrors[name] = Result { () throws(CollectionMirror.Divergence) in
                try mirror.feed(event)
                return mirror
            }
        }
        return mirrors
    }

    /// Keeps a collection's mirror (nil: forgets the collection) and rewrites FILE.
    mutating func store(_ mirror: CollectionMirror?, of name: String) throws(StateFileError) {
        if let mirror, let version = mirror.version, let epoch = mirror.epoch {
            lines[name] = WireEncoder.snapshotEvent(
                collection: name, epoch: epoch, version: version, snapshot: mirror.snapshot)
        } else {
            lines[name] = nil
        }
        try write()
    }

    /// Writes every line to a temporary file beside FILE and renames it over FILE: a reader (or
    /// the next `sub` after a crash) finds the old content or the new, never a part.
    func write() throws(StateFileError) {
        let temporary = "\(path).\(getpid()).tmp"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw StateFileError(path: temporary, errno) }
        var failure: Int32?
        for name in lines.keys.sorted() where failure == nil {
            failure = Self.writeAll(lines[name] ?? [], to: descriptor)
        }
        close(descriptor)
        if let failure {
            unlink(temporary)
            throw StateFileError(path: temporary, failure)
        }
        guard rename(temporary, path) == 0 else {
            let code = errno
            unlink(temporary)
            throw StateFileError(path: path, code)
        }
    }

    /// Writes every byte; the `errno` of a failure, nil on success.
    private static func writeAll(_ bytes: [UInt8], to descriptor: Int32) -> Int32? {
        var written = 0
        while written < bytes.count {
            let count = bytes[written...].withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                guard errno == EINTR else { return errno }
            } else {
                written += count
            }
        }
        return nil
    }
}

/// A state file that could not be written: the file and the system's reason.
struct StateFileError: Error, CustomStringConvertible {
    let path: String
    let code: Int32

    init(path: String, _ code: Int32) {
        self.path = path
        self.code = code
    }

    var description: String { "cannot write \(path): \(String(cString: strerror(code)))" }
}

import Glibc

/// What went wrong with the state directory, naming the file (and offset) involved and what
/// an operator can do. Recovery throws these before it changes any file.
public enum PersistenceError: Error, CustomStringConvertible {
    case system(String, path: String, errno: Int32)
    case corruptRecord(path: String, offset: Int, reason: String)
    case badCheckpoint(path: String, reason: String)
    case missingFile(path: String, reason: String)
    /// Another process holds the state directory's lock (its pid, when it wrote one).
    case locked(directory: String, holder: String?)
    /// `--verify-state` was given a directory that holds no Diffcast state.
    case notAStateDirectory(String)

    private static let advice =
        "nothing was changed; check the disk, restore the state directory from a backup, or move the damaged "
        + "files aside to start from what precedes them (`diffcastd --verify-state DIR` checks a directory "
        + "without starting)"

    public var description: String {
        switch self {
        case .system(let what, let path, let code):
            "\(what) \(path): \(String(cString: strerror(code)))"
        case .corruptRecord(let path, let offset, let reason):
            "damaged write-ahead log \(path) at offset \(offset): \(reason); \(Self.advice)"
        case .badCheckpoint(let path, let reason):
            "damaged checkpoint \(path): \(reason); \(Self.advice)"
        case .missingFile(let path, let reason):
            "missing \(path): \(reason); \(Self.advice)"
        case .notAStateDirectory(let directory):
            "\(directory) holds no Diffcast state (no checkpoint.json, no wal-N.log): is it the daemon's --state-dir?"
        case .locked(let directory, let holder):
            "state directory \(directory) is in use by another daemon (\(holder.map { "pid \($0)" } ?? "pid unknown")); "
                + "two daemons on one state directory would lose acknowledged writes: stop that one or choose "
                + "another --state-dir (`diffcastd --verify-state DIR` reads a directory in use without harming it)"
        }
    }
}

/// Thin, error-checked wrappers over the POSIX calls that durability depends on.
enum FileIO {
    static func open(_ path: String, _ flags: Int32, mode: mode_t = 0o640) throws -> Int32 {
        let descriptor = Glibc.open(path, flags | O_CLOEXEC, mode)
        guard descriptor >= 0 else { throw PersistenceError.system("open", path: path, errno: errno) }
        return descriptor
    }

    static func writeAll(_ descriptor: Int32, _ bytes: [UInt8], path: String) throws {
        try bytes.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let written = Glibc.write(descriptor, raw.baseAddress.map { $0 + offset }, raw.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    throw PersistenceError.system("write", path: path, errno: errno)
                }
                offset += written
            }
        }
    }

    static func sync(_ descriptor: Int32, path: String) throws {
        guard fdatasync(descriptor) == 0 else { throw PersistenceError.system("fsync", path: path, errno: errno) }
    }

    static func readAll(_ path: String) throws -> [UInt8] {
        let descriptor = try open(path, O_RDONLY)
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw PersistenceError.system("read", path: path, errno: errno)
            }
            if count == 0 { return bytes }
            bytes.append(contentsOf: chunk[..<count])
        }
    }

    /// Writes a whole file so that a crash leaves either the old or the new one: temporary
    /// file, fsync, rename, fsync of the directory.
    static func replaceAtomically(_ path: String, with bytes: [UInt8], directory: String) throws {
        let temporary = path + ".tmp"
        let descriptor = try open(temporary, O_WRONLY | O_CREAT | O_TRUNC)
        do {
            try writeAll(descriptor, bytes, path: temporary)
            try sync(descriptor, path: temporary)
        } catch {
            close(descriptor)
            throw error
        }
        close(descriptor)
        guard rename(temporary, path) == 0 else {
            throw PersistenceError.system("rename", path: temporary, errno: errno)
        }
        try syncDirectory(directory)
    }

    static func syncDirectory(_ directory: String) throws {
        let descriptor = try open(directory, O_RDONLY | O_DIRECTORY)
        defer { close(descriptor) }
        try sync(descriptor, path: directory)
    }

    static func listDirectory(_ directory: String) throws -> [String] {
        guard let handle = opendir(directory) else {
            throw PersistenceError.system("opendir", path: directory, errno: errno)
        }
        defer { closedir(handle) }
        var names: [String] = []
        while let entry = readdir(handle) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted()
    }
}

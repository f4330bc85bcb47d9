import DiffcastCore
import DiffcastEngine
import DiffcastWire

/// The checkpoint file: every collection (epoch, version, sections, items, data) as JSON,
/// followed by a trailer line with the CRC-32 and length of everything before it, so that a
/// flipped byte anywhere (a digit inside data, an epoch, a version) stops the start instead of
/// starting with altered state.
///
///     {"format":2,"wal":G,"next_sequence":N,"collections":[…]}\n
///     crc32 1a2b3c4d bytes 12345\n
///
/// `wal` is the last log generation the checkpoint covers and `next_sequence` the sequence
/// number the first record after it carries.
///
/// A collection's recent history (the versions a subscriber may resume from with one changeset)
/// is kept as `history`: for each earlier version, oldest first, the changeset event that leads
/// from the checkpoint's version back to it, with that version's digest. Changesets cost what
/// changed, not what the collection holds; a reader of format 2 without history ignores them.
enum CheckpointFile {
    static let format = 2

    /// One collection as the checkpoint holds it.
    struct Entry {
        var name: String
        var epoch: String
        var version: UInt64
        var sections: [SectionOutline]
        /// Earlier versions, oldest first, rebuilt from their changesets and checked.
        var history: VersionHistory = []
    }

    /// What `encode` takes of each collection: its state, and its retained earlier versions.
    typealias Source = (name: String, epoch: String, version: UInt64, snapshot: Snapshot, history: VersionHistory)

    struct Contents {
        var coveredGeneration: UInt64
        var nextSequence: UInt64
        var collections: [Entry]
    }

    static func encode(_ entries: [Source], coveredGeneration: UInt64, nextSequence: UInt64) -> [UInt8] {
        var output = JSONOutput(reservingCapacity: 1 << 16)
        output.appendRaw("{\"format\":")
        output.append(format)
        output.appendRaw(",\"wal\":")
        output.append(coveredGeneration)
        output.appendRaw(",\"next_sequence\":")
        output.append(nextSequence)
        output.appendRaw(",\"collections\":[")
        for (index, entry) in entries.enumerated() {
            output.appendRaw(index == 0 ? "{\"name\":" : ",{\"name\":")
            output.append(string: entry.name)
            WireEncoder.appendState(of: entry.snapshot, version: entry.version, epoch: entry.epoch, into: &output)
            if !entry.history.isEmpty {
                output.appendRaw(",\"history\":[")
                for (index, past) in entry.history.enumerated() {
                    if index > 0 { output.appendByte(UInt8(ascii: ",")) }
                    let event = WireEncoder.changesetEvent(
                        collection: entry.name, epoch: entry.epoch, from: entry.version, to: past.version,
                        changeset: Differ.changeset(from: entry.snapshot, to: past.snapshot),
                        digest: Digest(of: past.snapshot))
                    output.appendRaw(bytes: event.dropLast())
                }
                output.appendByte(UInt8(ascii: "]"))
            }
            output.appendByte(UInt8(ascii: "}"))
        }
        output.appendRaw("]}\n")
        var bytes = output.bytes
        let checksum = String(CRC32.checksum(bytes), radix: 16)
        bytes.append(
            contentsOf: "crc32 \(String(repeating: "0", count: 8 - checksum.count) + checksum) bytes \(bytes.count)\n"
                .utf8)
        return bytes
    }

    static func decode(_ bytes: [UInt8], path: String) throws(PersistenceError) -> Contents {
        func damaged(_ reason: String) -> PersistenceError { .badCheckpoint(path: path, reason: reason) }
        let content = try checkedContent(of: bytes, path: path)
        let value: JSONValue
        do {
            value = try JSONParser.parse(content, maximumDepth: 1024)
        } catch {
            throw damaged(error.message)
        }
        guard case .number(let formatText) = value["format"], Int(formatText) == format,
            case .number(let coveredText) = value["wal"], let covered = UInt64(counter: coveredText),
            case .number(let sequenceText) = value["next_sequence"], let nextSequence = UInt64(counter: sequenceText),
            case .array(let rawCollections) = value["collections"]
        else { throw damaged("missing 'format', 'wal', 'next_sequence' or 'collections'") }
        var collections: [Entry] = []
        for raw in rawCollections {
            collections.append(try entry(raw, path: path))
        }
        return Contents(coveredGeneration: covered, nextSequence: nextSequence, collections: collections)
    }

    /// The file without its checksum line, once the line's length and CRC-32 match it.
    private static func checkedContent(of bytes: [UInt8], path: String) throws(PersistenceError) -> [UInt8] {
        func damaged(_ reason: String) -> PersistenceError { .badCheckpoint(path: path, reason: reason) }
        guard bytes.last == UInt8(ascii: "\n") else { throw damaged("it does not end with its checksum line") }
        let body = bytes.dropLast()
        let trailerStart = (body.lastIndex(of: UInt8(ascii: "\n")) ?? -1) + 1
        let trailer = String(decoding: body[trailerStart...], as: UTF8.self).split(separator: " ")
        guard trailer.count == 4, trailer[0] == "crc32", trailer[2] == "bytes", let length = Int(trailer[3]),
            let checksum = UInt32(trailer[1], radix: 16)
        else {
            if bytes.starts(with: Array("{\"wal\":".utf8)) {
                throw damaged(
                    "written by diffcastd 0.1 (no checksum), which this version does not read: keep 0.1 on this "
                        + "directory, or move it aside to start afresh")
            }
            throw damaged("no checksum line at its end")
        }
        let content = Array(bytes[0..<trailerStart])
        guard content.count == length else {
            throw damaged("its checksum line says \(length) bytes, the file holds \(content.count)")
        }
        guard CRC32.checksum(content) == checksum else { throw damaged("checksum mismatch") }
        return content
    }

    /// One collection of the checkpoint, its digest checked, and each version of its history
    /// rebuilt from the current one and checked against its digest.
    private static func entry(_ raw: JSONValue, path: String) throws(PersistenceError) -> Entry {
        func damaged(_ reason: String) -> PersistenceError { .badCheckpoint(path: path, reason: reason) }
        guard case .string(let name) = raw["name"], case .string(let epoch) = raw["epoch"],
            case .number(let versionText) = raw["version"], let version = UInt64(counter: versionText)
        else { throw damaged("a collection without name, epoch or version") }
        let sections: [SectionOutline]
        do {
            sections = try EventDecoder.outline(raw["sections"])
        } catch {
            throw damaged("\(name): \(error)")
        }
        guard case .string(let digest) = raw["digest"], digest == Digest(of: sections).description else {
            throw damaged("\(name): digest mismatch")
        }
        var history: VersionHistory = []
        if case .array(let events) = raw["history"], !events.isEmpty {
            guard let current = try? Document(restoring: sections).snapshot else {
                throw damaged("\(name): its sections do not make a collection")
            }
            for event in events {
                guard case .number(let pastText) = event["version"], let past = UInt64(counter: pastText),
                    past < version,
                    history.last.map({ $0.version < past }) ?? true,
                    case .string(let pastDigest) = event["digest"],
                    let changeset = try? EventDecoder.changeset(event),
                    let snapshot = try? changeset.apply(to: current), Digest(of: snapshot).description == pastDigest
                else { throw damaged("\(name): an entry of its history does not rebuild its version") }
                history.append((past, snapshot))
            }
        }
        return Entry(name: name, epoch: epoch, version: version, sections: sections, history: history)
    }
}

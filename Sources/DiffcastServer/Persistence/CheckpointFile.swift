import DiffcastCore
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
enum CheckpointFile {
    static let format = 2

    /// One collection as the checkpoint holds it.
    struct Entry {
        var name: String
        var epoch: String
        var version: UInt64
        var sections: [SectionOutline]
    }

    struct Contents {
        var coveredGeneration: UInt64
        var nextSequence: UInt64
        var collections: [Entry]
    }

    static func encode(
        _ entries: [(name: String, epoch: String, version: UInt64, snapshot: Snapshot)], coveredGeneration: UInt64,
        nextSequence: UInt64
    ) -> [UInt8] {
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
        let value: JSONValue
        do {
            value = try JSONParser.parse(content, maximumDepth: 1024)
        } catch {
            throw damaged(error.message)
        }
        guard case .number(let formatText) = value["format"], Int(formatText) == format,
            case .number(let coveredText) = value["wal"], let covered = UInt64(coveredText),
            case .number(let sequenceText) = value["next_sequence"], let nextSequence = UInt64(sequenceText),
            case .array(let rawCollections) = value["collections"]
        else { throw damaged("missing 'format', 'wal', 'next_sequence' or 'collections'") }
        var collections: [Entry] = []
        for raw in rawCollections {
            guard case .string(let name) = raw["name"], case .string(let epoch) = raw["epoch"],
                case .number(let versionText) = raw["version"], let version = UInt64(versionText)
            else { throw damaged("a collection without name, epoch or version") }
            let sections: [SectionOutline]
            do {
                sections = try CollectionMirror.outline(raw["sections"])
            } catch {
                throw damaged("\(name): \(error)")
            }
            guard case .string(let digest) = raw["digest"], digest == Digest(of: sections).description else {
                throw damaged("\(name): digest mismatch")
            }
            collections.append(Entry(name: name, epoch: epoch, version: version, sections: sections))
        }
        return Contents(coveredGeneration: covered, nextSequence: nextSequence, collections: collections)
    }
}

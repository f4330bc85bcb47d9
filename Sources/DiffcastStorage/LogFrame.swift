/// The framing of write-ahead-log records, redundant enough to tell a torn tail (what a crash
/// in the middle of an append leaves at the end of the file) from damage anywhere else.
///
/// A record is a 24-byte header and its payload, integers little-endian:
///
///     "DCLG" | sequence (8) | payload length (4) | payload CRC-32 (4) | header CRC-32 (4) | payload
///
/// The header CRC covers the 20 bytes before it, so a damaged length is never trusted (LevelDB
/// and PostgreSQL's `xl_crc` guard the length the same way). Sequence numbers count every record
/// of a state directory and continue from one log file to the next (like PostgreSQL's LSNs), so
/// a record from elsewhere, a lost file or a missing checkpoint shows as a break in the count.
enum LogFrame {
    static let magic: [UInt8] = Array("DCLG".utf8)
    static let headerSize = 24

    static func encode(sequence: UInt64, payload: [UInt8], into frame: inout [UInt8]) {
        let start = frame.count
        frame.append(contentsOf: magic)
        append(sequence, into: &frame)
        append(UInt32(payload.count), into: &frame)
        append(CRC32.checksum(payload), into: &frame)
        let headerChecksum = frame[start..<(start + 20)].withUnsafeBytes { CRC32.checksum($0) }
        append(headerChecksum, into: &frame)
        frame.append(contentsOf: payload)
    }

    private static func append<Integer: FixedWidthInteger>(_ value: Integer, into frame: inout [UInt8]) {
        withUnsafeBytes(of: value.littleEndian) { frame.append(contentsOf: $0) }
    }

    /// A record whose header and payload both check out.
    struct Record {
        let offset: Int
        let sequence: UInt64
        let payload: ArraySlice<UInt8>
        var end: Int { offset + LogFrame.headerSize + payload.count }
    }

    /// Why the bytes at an offset are not a whole, valid record.
    enum Damage: Error, Equatable, CustomStringConvertible {
        case partialHeader(bytes: Int)
        case badHeader
        case pastTheEnd(length: Int, available: Int)
        case badPayloadChecksum

        var description: String {
            switch self {
            case .partialHeader(let bytes): "a record header cut short (\(bytes) of \(LogFrame.headerSize) bytes)"
            case .badHeader: "a record header that fails its checksum"
            case .pastTheEnd(let length, let available):
                "a record of \(length) bytes with only \(available) left in the file"
            case .badPayloadChecksum: "a record whose payload fails its checksum"
            }
        }
    }

    /// The record at `offset`, or what is wrong with it.
    static func record(in bytes: [UInt8], at offset: Int) -> Result<Record, Damage> {
        let available = bytes.count - offset
        guard available >= headerSize else { return .failure(.partialHeader(bytes: available)) }
        guard let header = validHeader(in: bytes, at: offset) else { return .failure(.badHeader) }
        guard header.length <= available - headerSize else {
            return .failure(.pastTheEnd(length: header.length, available: available - headerSize))
        }
        let payload = bytes[(offset + headerSize)..<(offset + headerSize + header.length)]
        guard payload.withUnsafeBytes({ CRC32.checksum($0) }) == header.payloadChecksum else {
            return .failure(.badPayloadChecksum)
        }
        return .success(Record(offset: offset, sequence: header.sequence, payload: payload))
    }

    /// The first offset after `offset` where a header with a valid checksum starts, if any: a
    /// crash damages only the end of a log, so damage with a valid record after it is not torn.
    static func nextValidHeader(in bytes: [UInt8], after offset: Int) -> (offset: Int, sequence: UInt64)? {
        var position = offset + 1
        while position + headerSize <= bytes.count {
            if bytes[position] == magic[0], let header = validHeader(in: bytes, at: position) {
                return (position, header.sequence)
            }
            position += 1
        }
        return nil
    }

    private static func validHeader(in bytes: [UInt8], at offset: Int)
        -> (sequence: UInt64, length: Int, payloadChecksum: UInt32)?
    {
        guard offset + headerSize <= bytes.count, bytes[offset..<(offset + 4)].elementsEqual(magic) else { return nil }
        let stored = integer(UInt32.self, bytes, offset + 20)
        guard bytes[offset..<(offset + 20)].withUnsafeBytes({ CRC32.checksum($0) }) == stored else { return nil }
        return (
            integer(UInt64.self, bytes, offset + 4), Int(integer(UInt32.self, bytes, offset + 12)),
            integer(UInt32.self, bytes, offset + 16)
        )
    }

    private static func integer<Integer: FixedWidthInteger>(_: Integer.Type, _ bytes: [UInt8], _ offset: Int) -> Integer
    {
        var value: Integer = 0
        for index in 0..<MemoryLayout<Integer>.size {
            value |= Integer(bytes[offset + index]) << (8 * index)
        }
        return value
    }
}

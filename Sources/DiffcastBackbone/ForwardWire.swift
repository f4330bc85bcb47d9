import DiffcastEngine
import DiffcastWire

/// A forwarded batch's reply on the wire: a JSON header line (`{"sequence":N}`,
/// `{"owner":"node"}` / `{"owner":null}`, or `{"unavailable":"why"}`), then, when answered,
/// the owner's response to each request line, one per line (each response's own line feed is
/// taken off on the way and put back on arrival).
enum ForwardWire {
    static func encode(_ reply: ForwardReply) -> [UInt8] {
        var output = JSONOutput()
        switch reply {
        case .answered(let sequence, let responses):
            output.appendRaw("{\"sequence\":")
            output.append(sequence)
            output.appendRaw("}")
            var bytes = output.bytes
            for response in responses {
                bytes.append(UInt8(ascii: "\n"))
                bytes.append(contentsOf: response.last == UInt8(ascii: "\n") ? response.dropLast() : response[...])
            }
            return bytes
        case .notOwner(let owner):
            output.appendRaw("{\"owner\":")
            if let owner { output.append(string: owner) } else { output.appendRaw("null") }
            output.appendRaw("}")
        case .unavailable(let reason):
            output.appendRaw("{\"unavailable\":")
            output.append(string: reason)
            output.appendRaw("}")
        }
        return output.bytes
    }

    static func decode(_ bytes: [UInt8]) -> ForwardReply? {
        var lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).makeIterator()
        guard let header = lines.next(), let value = try? JSONParser.parse(Array(header), maximumDepth: 2) else {
            return nil
        }
        if case .number(let text) = value["sequence"], let sequence = UInt64(text) {
            return .answered(sequence: sequence, responses: lines.map { Array($0) + [UInt8(ascii: "\n")] })
        }
        if case .string(let reason) = value["unavailable"] { return .unavailable(reason) }
        switch value["owner"] {
        case .string(let owner): return .notOwner(owner: owner)
        case .null: return .notOwner(owner: nil)
        default: return nil
        }
    }
}

/// Collection names as one token of a NATS subject or a key of a key-value bucket: letters,
/// digits, `-` and `_` stay, every other byte of the UTF-8 becomes `=XX`, so that any name maps
/// to exactly one token and back.
enum SubjectToken {
    static func encode(_ name: String) -> String {
        var token = ""
        for byte in name.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
                token.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = String(byte, radix: 16, uppercase: true)
                token += "=" + (hex.count == 1 ? "0" + hex : hex)
            }
        }
        return token.isEmpty ? "=" : token
    }

    /// The name `encode` made `token` from; nil for a token `encode` never makes.
    static func decode(_ token: Substring) -> String? {
        guard token != "=" else { return "" }
        var bytes: [UInt8] = []
        var rest = token.utf8[...]
        while let byte = rest.popFirst() {
            guard byte == UInt8(ascii: "=") else {
                bytes.append(byte)
                continue
            }
            guard rest.count >= 2, let value = UInt8(String(decoding: rest.prefix(2), as: UTF8.self), radix: 16)
            else { return nil }
            bytes.append(value)
            rest = rest.dropFirst(2)
        }
        let name = String(decoding: bytes, as: UTF8.self)
        return encode(name) == token ? name : nil
    }
}

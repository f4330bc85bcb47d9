import DiffcastCore

@testable import DiffcastWire

extension FuzzTargets {
    /// Bytes from a client socket, as the daemon's loop handles them (Server.onRead/handleLine):
    /// framed into lines by `LineFramer`, whitespace-only lines skipped, each line parsed by
    /// `RequestParser` (JSON object or inline form, down to `WriteDecoder`), and answered: an error
    /// response for a line that does not parse. Every response must be one line of JSON.
    public static func requestLine(_ input: UnsafeRawBufferPointer) {
        // The line that ends the input is a line too (the daemon would wait for its `\n`).
        var stream = Array(input)
        stream.append(UInt8(ascii: "\n"))
        let parser = RequestParser(limits: RequestLimits())
        var framer = LineFramer(maximumLineBytes: 2048)
        // One workspace for every line of the input, as the loop keeps one.
        var workspace = RequestParser.Workspace()
        let blanks: [UInt8] = [UInt8(ascii: " "), UInt8(ascii: "\r"), UInt8(ascii: "\t")]
        stream.withUnsafeBytes { raw in
            framer.feed(raw) { piece in
                guard case .line(let bytes) = piece else {
                    check(WireEncoder.failure(id: nil, op: nil, error: .lineTooLong(limit: 2048)), "line_too_long")
                    return
                }
                let line = Array(bytes)
                if line.allSatisfy({ blanks.contains($0) }) { return }
                checkCompactAppendReader(line, parser)
                let parsed = Result { () throws(RequestError) in try parser.parse(bytes, reusing: &workspace) }
                // What a line leaves in the workspace never shows in the next line's request.
                let fresh = Result { () throws(RequestError) in try parser.parse(line: line) }
                guard parsed == fresh else { Fuzz.failure("a reused workspace read \(parsed), a fresh one \(fresh)") }
                do throws(RequestError) {
                    let request = try parsed.get()
                    var expected = line
                    if expected.last == UInt8(ascii: "\r") { expected.removeLast() }
                    guard request.line == expected, request.lineLength == expected.count else {
                        Fuzz.failure("the request keeps another line")
                    }
                    check(WireEncoder.success(id: request.id, op: request.op), "success")
                } catch {
                    check(WireEncoder.failure(id: error.id, op: error.op, error: error.error), "failure")
                }
            }
        }
    }
}

/// The law of the shortcut for compact `append_items` lines: whatever it reads, the general
/// path reads the same way (and it never takes a line the general path refuses).
private func checkCompactAppendReader(_ line: [UInt8], _ parser: RequestParser) {
    var bytes = line
    if bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
    bytes.withUnsafeBufferPointer { buffer in
        var tokens: [JSONToken] = []
        guard let read = CompactAppendReader.request(from: buffer, limits: parser.limits, tokens: &tokens) else {
            return
        }
        var workspace = RequestParser.Workspace()
        let general = Result { () throws(RequestError) in try parser.decodeInGeneral(buffer, &workspace) }
        guard case .success(let request) = general, request == read else {
            Fuzz.failure("the compact append reader made \(read), the general path \(general)")
        }
    }
}

/// A response is one line of JSON (an id or message echoed from the request must be escaped);
/// checked by the parser's tokenizer alone, which is what costs least.
private func check(_ response: [UInt8], _ what: String) {
    let isJSON = response.withUnsafeBufferPointer { buffer in
        (try? JSONParser.withView(of: UnsafeBufferPointer(rebasing: buffer.dropLast()), maximumDepth: 16) { _ in })
            != nil
    }
    guard response.last == UInt8(ascii: "\n"), !response.dropLast().contains(UInt8(ascii: "\n")), isJSON else {
        Fuzz.failure("\(what) response is not one JSON line: \(String(decoding: response, as: UTF8.self))")
    }
}

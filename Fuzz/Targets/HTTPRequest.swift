import DiffcastHTTP

extension FuzzTargets {
    /// Bytes from an HTTP client, as the front end reads them: cut where the input's first byte says
    /// (so that a request split across reads is tried too), fed to `HTTPRequestReader` with small
    /// limits, and every request read routed (`HTTPRouter`, with a token and an origin list). Oracles:
    /// nothing traps; a request carries at most the limits' bytes; a route that runs lines runs
    /// JSON objects.
    public static func httpRequest(_ input: UnsafeRawBufferPointer) {
        var bytes = Array(input)
        let cut = bytes.isEmpty ? 1 : Int(bytes.removeFirst() % 16) + 1
        let reader = HTTPRequestReader(maximumHeadBytes: 512, maximumBodyBytes: 256)
        let routers = [HTTPRouter(allowedOrigins: []), HTTPRouter(allowedOrigins: ["*"])]
        var start = 0
        while start < bytes.count {
            let end = min(start + cut, bytes.count)
            let output = bytes[start..<end].withUnsafeBytes { reader.feed($0) }
            for request in output.requests {
                if request.body.count > 256 { Fuzz.failure("a body past the limit") }
                for router in routers {
                    if case .requests(let lines, _) = router.route(request) {
                        for line in lines
                        where line.first != UInt8(ascii: "{") && request.path.hasPrefix("/v1/collections/") {
                            Fuzz.failure("a path route made a line that is not a JSON object")
                        }
                    }
                }
            }
            if output.failure != nil || output.upgradeBytes != nil { break }
            start = end
        }
    }
}

import DiffcastEngine
import DiffcastWire

/// Engines and jobs the in-process benchmarks share (`DiffcastBenchmarks`, and
/// `DiffcastAllocations`, which stands apart for its malloc counter).
public enum Fixtures {
    /// An engine holding collection `c`: about `size` items in 100 sections, `i0`, `i1`, … in
    /// order.
    public static func engineHolding(size: Int) throws -> ApplyEngine {
        let engine = ApplyEngine()
        let perSection = max(1, size / 100)
        var sections: [String] = []
        for section in 0..<100 {
            let items = (0..<perSection).map { "\"i\(section * perSection + $0)\"" }.joined(separator: ",")
            sections.append("{\"id\":\"s\(section)\",\"items\":[\(items)]}")
        }
        let apply = "{\"op\":\"apply\",\"collection\":\"c\",\"sections\":[\(sections.joined(separator: ","))]}"
        _ = engine.process([try job(apply, 0)])
        return engine
    }

    /// A request line as the loop hands it to the engine, from `connection`.
    public static func job(_ line: String, _ slot: UInt64, connection: ConnectionID = 1_000_000) throws -> Job {
        .request(try RequestParser().parse(line: Array(line.utf8)), ResponseAddress(connection: connection, slot: slot))
    }
}

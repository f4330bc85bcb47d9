import BenchmarkFixtures
import CMallocCounter
import DiffcastCore
import DiffcastEngine
import DiffcastWire
import Foundation

/// Allocations per version for one small write on a large collection: the table a regression
/// in the write path shows up in (`make bench BENCH=allocations`). Every malloc of the process is
/// counted (CMallocCounter); each write is its own version, published to one whole subscriber,
/// so the count holds the request's parsing, the apply, the diff, the history kept for catch-ups
/// and the encoded event and answer. The loop's fan-out (socket writes) is not in it.

/// An engine holding collection `c` (`Fixtures.engineHolding`) with one whole subscriber.
func engineHolding(size: Int) throws -> ApplyEngine {
    let engine = try Fixtures.engineHolding(size: size)
    // As in a daemon without a state directory: no log records are made (nothing would take them).
    engine.keepsLogRecords = false
    _ = engine.process([try Fixtures.job("subscribe c", 1, connection: 1)])
    return engine
}

/// The write number `step` of each kind as a backend sends it (a JSON object), on items no earlier
/// step touched in a way that fails it.
let writes: [(name: String, line: (Int, Int) -> String)] = [
    (
        "update_items",
        { step, size in
            #"{"op":"update_items","collection":"c","items":[{"id":"i\#(step * 7 % size)","data":{"n":\#(step)}}]}"#
        }
    ),
    ("append_items", { step, _ in #"{"op":"append_items","collection":"c","section":"s99","items":["n\#(step)"]}"# }),
    // The feed's shape, read by `CompactAppendReader` (no section named: the last one).
    (
        "append_items (compact)",
        { step, _ in #"{"op":"append_items","collection":"c","items":[{"id":"f\#(step)","data":{"text":"hello"}}]}"# }
    ),
    (
        "insert_items",
        { step, size in #"{"op":"insert_items","collection":"c","items":["m\#(step)"],"before":"i\#(size / 2 + step)"}"#
        }
    ),
    (
        "move_item",
        { step, size in
            #"{"op":"move_item","collection":"c","item":"i\#(step * 13 % size)","after":"i\#((step * 13 + 500) % size)"}"#
        }
    ),
    ("delete_items", { step, size in #"{"op":"delete_items","collection":"c","items":["i\#(size / 3 + step)"]}"# }),
]

let warmUp = 50
let measured = 1_000
print("## Allocations per version: one small write, its own version, one whole subscriber\n")
print("Each row: \(measured) writes after \(warmUp) to warm up; every malloc of the process counted.\n")
print("| items | write | allocations: parse | apply, publish, encode | bytes asked for per version |")
print("|---:|---|---:|---:|---:|")
// Sizes from the command line (`DiffcastAllocations 10000`, at least 10,000: the writes name
// items up to half the size plus a thousand), 10k and 1M by default.
let sizes = CommandLine.arguments.dropFirst().compactMap { Int($0) }.filter { $0 >= 10_000 }
for size in sizes.isEmpty ? [10_000, 1_000_000] : sizes {
    for write in writes {
        let engine = try engineHolding(size: size)
        var lines: [[UInt8]] = []
        for step in 0..<(warmUp + measured) { lines.append(Array(write.line(step, size).utf8)) }
        for step in 0..<warmUp { _ = engine.process([try Fixtures.job(write.line(step, size), UInt64(step + 2))]) }
        var parsing: UInt64 = 0
        var applying: UInt64 = 0
        var bytes: UInt64 = 0
        // Parsed as the loop of a daemon without a state directory parses: no line kept, one
        // workspace lent from line to line.
        let parser = RequestParser(keepsLines: false)
        var workspace = RequestParser.Workspace()
        for step in warmUp..<(warmUp + measured) {
            let start = dc_allocation_count()
            let startBytes = dc_allocated_bytes()
            let request = try lines[step].withUnsafeBufferPointer { bytes throws(RequestError) in
                try parser.parse(bytes, reusing: &workspace)
            }
            let parsed = dc_allocation_count()
            let outcomes = engine.process([
                .request(request, ResponseAddress(connection: 1_000_000, slot: UInt64(step + 2)))
            ])
            applying += dc_allocation_count() - parsed
            parsing += parsed - start
            bytes += dc_allocated_bytes() - startBytes
            guard outcomes.contains(where: { if case .published = $0 { true } else { false } }) else {
                fatalError("\(write.name) step \(step) published nothing: \(outcomes)")
            }
        }
        let count = Double(measured)
        let parse = String(format: "%.1f", Double(parsing) / count)
        let apply = String(format: "%.1f", Double(applying) / count)
        let perVersion = Int(Double(bytes) / count)
        print("| \(size) | \(write.name) | \(parse) | \(apply) | \(perVersion) |")
    }
}

// What an idle collection costs the apply queue: one section of one item, made by one `apply`.
print("\n## An idle one-item collection in the apply queue\n")
print("| collections | allocations made, per collection | live heap, bytes per collection |")
print("|---:|---:|---:|")
do {
    let collections = 10_000
    let engine = ApplyEngine()
    engine.keepsLogRecords = false
    let lines = (0..<collections).map {
        Array(#"{"op":"apply","collection":"c\#($0)","sections":[{"id":"s","items":["i"]}]}"#.utf8)
    }
    let parser = RequestParser()
    let requests = try lines.map { try parser.parse(line: $0) }
    let heapBefore = dc_heap_in_use()
    let start = dc_allocation_count()
    for (slot, request) in requests.enumerated() {
        _ = engine.process([.request(request, ResponseAddress(connection: 1, slot: UInt64(slot)))])
    }
    let made = Double(dc_allocation_count() - start) / Double(collections)
    let live = Double(dc_heap_in_use() - heapBefore) / Double(collections)
    print("| \(collections) | \(String(format: "%.1f", made)) | \(Int(live)) |")
    // The parsed requests stay alive to here: released before the count, they would be taken off it.
    withExtendedLifetime((engine, requests)) {}
}

// What an item costs a large collection, against the same items held the plain way: an array of
// (id, data) strings and a reserved `[String: Int]` from id to position (the least an id-indexed
// store holds). Counted as live heap, not resident memory: the resident size of one process
// also holds what earlier work freed, so whichever of the two is built second looks cheaper.
print("\n## Memory held per item: a 1,000,000-item collection against the same items held plainly\n")
print("Ids 'item-N', 32-byte data, one section, made by one `apply`; live heap after it.\n")
print("| items | Document (bytes/item) | plain (bytes/item) | Document / plain |")
print("|---:|---:|---:|---:|")
do {
    let count = 1_000_000
    let texts = (0..<count).map { index in
        (id: "item-\(index)", data: "\"" + ("\(index)" + String(repeating: "d", count: 30)).prefix(30) + "\"")
    }
    // Fresh strings, as a parser makes them: nothing shared with `texts`.
    let fresh = { (text: String) in String(decoding: Array(text.utf8), as: UTF8.self) }
    var heapBefore = dc_heap_in_use()
    var document = Document()
    try document.apply(
        .apply(sections: [
            SectionInput(
                id: "s",
                items: texts.map { Item(id: Identifier(fresh($0.id)), data: JSONText(canonical: fresh($0.data))) })
        ]))
    let documentBytes = Double(dc_heap_in_use() - heapBefore) / Double(count)
    heapBefore = dc_heap_in_use()
    var plainItems: [(id: String, data: String)] = []
    plainItems.reserveCapacity(count)
    var positions: [String: Int] = [:]
    positions.reserveCapacity(count)
    for (index, text) in texts.enumerated() {
        let item = (id: fresh(text.id), data: fresh(text.data))
        plainItems.append(item)
        positions[item.id] = index
    }
    let plainBytes = Double(dc_heap_in_use() - heapBefore) / Double(count)
    print(
        String(
            format: "| %d | %.1f | %.1f | %.2f× |", count, documentBytes, plainBytes, documentBytes / plainBytes))
    withExtendedLifetime((texts, document, plainItems, positions)) {}
}

import ArgumentParser
import DiffcastCore
import DiffcastWire
import Foundation

/// Runs the benchmarks and prints their tables; each carries a baseline measured in the same run.
@main
struct DiffcastBenchmarks: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "DiffcastBenchmarks", abstract: "Benchmark tables of Diffcast, each with a baseline.",
        subcommands: [
            DiffBenchmark.self, FeedBenchmark.self, PipelineBenchmark.self, DurabilityBenchmark.self,
            MemoryBenchmark.self, BackboneBenchmark.self, WindowBenchmark.self, AuthBenchmark.self,
            FanOutBenchmark.self,
        ],
        defaultSubcommand: DiffBenchmark.self)
}

/// The differ and the write path: times are medians of several runs, against the hash floor.
struct DiffBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "diff", abstract: "Full diffs against the hash floor; small writes on a large collection.")

    @Option(help: "Collection sizes for the full-diff table.")
    var sizes: [Int] = [10_000, 100_000, 1_000_000]

    @Option(help: "Runs per measurement; the median is reported.")
    var runs: Int = 3

    @Option(help: "Size of the collection for the small-writes table.")
    var writesCollectionSize: Int = 1_000_000

    func run() {
        printGrowingCollectionTable()
        printFullDiffTable()
        printSmallWritesTable()
    }

    // MARK: - Full diff

    private func printFullDiffTable() {
        emit("## Full `apply` of a whole new snapshot: build + diff, against the reserved-dictionary floor\n")
        emit("Workload: ids 'item-N', 32-byte data; 10% of ids deleted, 10% new ids inserted at random")
        emit("positions, 5% moved to random positions (some across sections), 5% with changed data.")
        emit("Build: the new snapshot and its id directory from the parsed request (`Document.apply`);")
        emit("diff: `Document.changeset(since:)`.")
        emit("Floor: a `Dictionary<String, Int>` with `reserveCapacity`, every old id inserted, every new")
        emit("id looked up, over plain arrays. Ratio: (build + diff) / floor. Median of \(runs) runs.\n")
        emit(
            "| items | sections | build (ms) | diff (ms) | floor (ms) | ratio | moves listed | moves made | Swift difference+inferringMoves (ms) |"
        )
        emit("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for size in sizes {
            for sections in [1, 100] {
                var rng = SplitMix64(seed: UInt64(size &* 31 &+ sections))
                let workload = Workload(items: size, sections: sections, using: &rng)
                var builds: [Double] = []
                var diffs: [Double] = []
                var changeset = Changeset()
                for _ in 0..<runs {
                    var document = workload.oldDocument
                    let start = ContinuousClock.now
                    try? document.apply(.apply(sections: workload.newInputs))
                    let built = ContinuousClock.now
                    changeset = document.changeset(since: workload.oldDocument.snapshot)
                    diffs.append(milliseconds(ContinuousClock.now - built))
                    builds.append(milliseconds(built - start))
                }
                let oldIDs = workload.oldDocument.snapshot.sections.flatMap { $0.items.map(\.id.text) }
                let newIDs = workload.newInputs.flatMap { $0.items.map(\.id.text) }
                let floor = median { _ = Self.floor(old: oldIDs, new: newIDs) }
                var swift = "skipped (O(ND))"
                if sections == 1 && size <= 10_000 {
                    swift = String(format: "%.1f", median { _ = newIDs.difference(from: oldIDs).inferringMoves() })
                }
                let build = builds.median
                let diff = diffs.median
                emit(
                    "| \(size) | \(sections) | \(format(build)) | \(format(diff)) | \(format(floor)) | \(String(format: "%.2f×", (build + diff) / floor)) | \(changeset.items.moved.count) | \(workload.movesMade) | \(swift) |"
                )
            }
        }
        emit()
    }

    /// The honest floor of any id-matching diff: one reserved table of the old ids, one lookup
    /// per new id.
    private static func floor(old: [String], new: [String]) -> Int {
        var positions: [String: Int] = [:]
        positions.reserveCapacity(old.count)
        for (index, id) in old.enumerated() { positions[id] = index }
        var found = 0
        for id in new where positions[id] != nil { found += 1 }
        return found
    }

    // MARK: - Growing collection

    /// The per-version cost of a feed: one appended item → changeset → digest → event bytes,
    /// at several sizes held; it must not grow with the collection.
    private func printGrowingCollectionTable() {
        emit("## One append to a growing collection: the whole per-version cost\n")
        emit("One ~100-byte item appended, then `changeset(since:)`, the digest and the encoded event;")
        emit("median of 1,000 versions at each size.\n")
        emit("| items held | append+diff (ms) | digest (ms) | encode (ms) | per version (ms) |")
        emit("|---:|---:|---:|---:|---:|")
        let text = JSONText(canonical: "{\"text\":\"" + String(repeating: "x", count: 80) + "\"}")
        for size in [10_000, 100_000, 1_000_000] {
            var document = Document()
            try? document.apply(
                .apply(sections: [SectionInput(id: "s", items: (0..<size).map { Item(id: "f\($0)", data: text) })]))
            _ = document.takeMarks()
            var applied: [Double] = []
            var digested: [Double] = []
            var encoded: [Double] = []
            var totals: [Double] = []
            for index in 0..<1000 {
                let base = document.snapshot
                let start = ContinuousClock.now
                try? document.apply(.appendItems([Item(id: "n\(index)", data: text)], section: nil))
                let changeset = document.changeset(since: base)
                let diffed = ContinuousClock.now
                let digest = Digest(of: document.snapshot)
                let digestDone = ContinuousClock.now
                _ = WireEncoder.changesetEvent(
                    collection: "feed", epoch: "e", from: UInt64(index), to: UInt64(index + 1), changeset: changeset,
                    digest: digest)
                let end = ContinuousClock.now
                applied.append(milliseconds(diffed - start))
                digested.append(milliseconds(digestDone - diffed))
                encoded.append(milliseconds(end - digestDone))
                totals.append(milliseconds(end - start))
            }
            emit(
                "| \(size) | \(format(applied.median)) | \(format(digested.median)) | \(format(encoded.median)) | \(format(totals.median)) |"
            )
        }
        emit()
    }

    // MARK: - Small writes

    private func printSmallWritesTable() {
        emit("## Small writes on a \(writesCollectionSize)-item collection (ops → changeset → encoded event)\n")
        emit("apply+diff: the writes and `Document.changeset(since:)`; encode: the event bytes; digest: the")
        emit("contract-2 digest, combined from cached chunk digests; mirror: a client applying the changeset")
        emit("to its copy (`Changeset.apply(to:)`) and checking the digest. Median of \(runs) runs.\n")
        emit("| sections | op | batch | apply+diff (ms) | encode (ms) | digest (ms) | mirror (ms) | listed |")
        emit("|---:|---|---:|---:|---:|---:|---:|---:|")
        for sections in [1, 100] {
            var rng = SplitMix64(seed: 7)
            let perSection = writesCollectionSize / sections
            let inputs = (0..<sections).map { section in
                SectionInput(id: "s\(section)", items: (0..<perSection).map { Item(id: "i\(section).\($0)") })
            }
            var base = Document()
            try? base.apply(.apply(sections: inputs))
            _ = base.takeMarks()
            let allIDs = inputs.flatMap { $0.items.map(\.id) }
            for op in ["update_items", "move_item", "insert_items", "delete_items"] {
                for batch in [1, 10, 1000] {
                    var applyDiff: [Double] = []
                    var encode: [Double] = []
                    var digest: [Double] = []
                    var mirror: [Double] = []
                    var listed = 0
                    for run in 0..<runs {
                        var document = base
                        // The daemon's document is never shared: make this copy unique (a write
                        // and its undo) and its position index current before the clock starts.
                        try? document.apply(.appendItems([Item(id: "warm-up")], section: nil))
                        try? document.apply(.deleteItems(["warm-up"]))
                        _ = document.takeMarks()
                        _ = document.location(of: allIDs[0])
                        let operations = (0..<batch).map { index in
                            smallWrite(op, index: index, run: run, ids: allIDs, using: &rng)
                        }
                        let start = ContinuousClock.now
                        let snapshot = document.snapshot
                        for operation in operations { try? document.apply(operation) }
                        let changeset = document.changeset(since: snapshot)
                        let diffed = ContinuousClock.now
                        let digestValue = Digest(of: document.snapshot)
                        let digested = ContinuousClock.now
                        _ = WireEncoder.changesetEvent(
                            collection: "bench", epoch: "e", from: 1, to: 2, changeset: changeset, digest: digestValue)
                        let encoded = ContinuousClock.now
                        if let mirrored = try? changeset.apply(to: snapshot), Digest(of: mirrored) != digestValue {
                            emit("mirror diverged: \(op) batch \(batch)")
                        }
                        mirror.append(milliseconds(ContinuousClock.now - encoded))
                        applyDiff.append(milliseconds(diffed - start))
                        digest.append(milliseconds(digested - diffed))
                        encode.append(milliseconds(encoded - digested))
                        listed =
                            changeset.items.updated.count + changeset.items.moved.count
                            + changeset.items.inserted.count + changeset.items.deleted.count
                    }
                    emit(
                        "| \(sections) | \(op) | \(batch) | \(format(applyDiff.median)) | \(format(encode.median)) | \(format(digest.median)) | \(format(mirror.median)) | \(listed) |"
                    )
                }
            }
        }
    }

    private func smallWrite(
        _ op: String, index: Int, run: Int, ids: [Identifier], using rng: inout SplitMix64
    ) -> WriteOperation {
        let target = ids[Int.random(in: 0..<ids.count, using: &rng)]
        let anchor = ids[Int.random(in: 0..<ids.count, using: &rng)]
        switch op {
        case "update_items":
            return .updateItems([DataUpdate(id: target, data: JSONText(canonical: "{\"n\":\(index + run * 10_000)}"))])
        case "move_item":
            return .moveItem(target, anchor: .after(anchor))
        case "insert_items":
            return .insertItems([Item(id: "new-\(run)-\(index)")], anchor: .before(anchor))
        default:
            return .deleteItems([target])
        }
    }

    // MARK: - Helpers

    private func median(_ body: () -> Void) -> Double {
        var samples: [Double] = []
        for _ in 0..<runs {
            let start = ContinuousClock.now
            body()
            samples.append(milliseconds(ContinuousClock.now - start))
        }
        return samples.median
    }

    private func milliseconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) * 1000 + Double(attoseconds) / 1e15
    }

    private func format(_ milliseconds: Double) -> String {
        milliseconds < 1 ? String(format: "%.3f", milliseconds) : String(format: "%.1f", milliseconds)
    }
}

/// An old document and the parsed sections of a new `apply` under the issue's workload, and
/// how many moves it made.
struct Workload {
    let oldDocument: Document
    let newInputs: [SectionInput]
    let movesMade: Int

    init(items count: Int, sections sectionCount: Int, using rng: inout SplitMix64) {
        let perSection = count / sectionCount
        var layout: [[Item]] = (0..<sectionCount).map { section in
            (0..<perSection).map {
                Item(id: "item-\(section * perSection + $0)", data: Self.data(section * perSection + $0))
            }
        }
        var old = Document()
        try? old.apply(
            .apply(sections: layout.enumerated().map { SectionInput(id: "s\($0.offset)", items: $0.element) }))
        _ = old.takeMarks()
        // 10% deleted.
        for section in layout.indices {
            layout[section].removeAll { _ in Int.random(in: 0..<10, using: &rng) == 0 }
        }
        // 5% moved to random positions, some across sections.
        let moves = count / 20
        for _ in 0..<moves {
            let from = Int.random(in: 0..<sectionCount, using: &rng)
            guard !layout[from].isEmpty else { continue }
            let item = layout[from].remove(at: Int.random(in: 0..<layout[from].count, using: &rng))
            let to = Int.random(in: 0..<sectionCount, using: &rng)
            layout[to].insert(item, at: Int.random(in: 0...layout[to].count, using: &rng))
        }
        // 5% with changed data.
        for section in layout.indices {
            for index in layout[section].indices where Int.random(in: 0..<20, using: &rng) == 0 {
                layout[section][index].data = Self.data(-1 - index)
            }
        }
        // 10% new identifiers at random positions.
        for number in 0..<(count / 10) {
            let section = Int.random(in: 0..<sectionCount, using: &rng)
            layout[section].insert(
                Item(id: "new-\(number)"), at: Int.random(in: 0...layout[section].count, using: &rng))
        }
        self.oldDocument = old
        self.newInputs = layout.enumerated().map { SectionInput(id: "s\($0.offset)", items: $0.element) }
        self.movesMade = moves
    }

    /// 32 bytes of JSON (a string), different for each `number`: data too long to be stored
    /// inline in a `String`, as in most real items.
    private static func data(_ number: Int) -> JSONText {
        JSONText(canonical: "\"" + String(("\(number)" + String(repeating: "d", count: 30)).prefix(30)) + "\"")
    }
}

struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) {
        state = seed
    }

    mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var value = state
        value = (value ^ (value >> 30)) &* 0xbf58_476d_1ce4_e5b9
        value = (value ^ (value >> 27)) &* 0x94d0_49bb_1331_11eb
        return value ^ (value >> 31)
    }
}

extension Array where Element == Double {
    var median: Double {
        guard !isEmpty else { return 0 }
        return sorted()[count / 2]
    }
}

/// Writes a line to standard output at once, so a long run shows its tables as they come.
func emit(_ line: String = "") {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

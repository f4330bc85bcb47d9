import DiffcastFuzzTargets
import Foundation
import Testing

/// The committed inputs of every fuzz target, replayed through the target's body (the function
/// libFuzzer runs, `FuzzTargets`): `Fuzz/regressions/<target>/` (inputs that once crashed it,
/// each with its root cause in Fuzz/regressions/README.md) and the seeds in `Fuzz/corpus/<target>/`
/// (what a real daemon made). So `make test` checks every oracle on them without a libFuzzer
/// build; `make fuzz` grows new inputs from the seeds under AddressSanitizer.
///
/// A broken oracle traps, as under libFuzzer, and ends the test run; its message names the file
/// (`Fuzz.input`). Any other trap (an overflow in the code under test) does not: set
/// `DIFFCAST_FUZZ_REPLAY_TRACE=1` to have each file named before it runs. Serialized: the targets
/// that write a state directory share the process's scratch directory.
@Suite(.serialized) struct FuzzReplayTests {
    /// Fuzz/, found from this file (Tests/DiffcastFuzzReplayTests/ in the root package).
    static let fuzzDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fuzz").path

    static let trace = ProcessInfo.processInfo.environment["DIFFCAST_FUZZ_REPLAY_TRACE"].map { !$0.isEmpty } ?? false

    /// The files of `directory`, sorted (no hidden ones); nil when it does not exist.
    static func inputs(in directory: String) -> [String]? {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return nil }
        return names.filter { !$0.hasPrefix(".") }.sorted().map { directory + "/" + $0 }
    }

    /// Runs every file of `paths` through `target`; returns how many ran.
    static func replay(_ paths: [String], through target: @Sendable (UnsafeRawBufferPointer) -> Void) throws -> Int {
        var replayed = 0
        for path in paths {
            let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
            if trace { FileHandle.standardError.write(Data("replaying \(path)\n".utf8)) }
            Fuzz.$input.withValue(path) {
                bytes.withUnsafeBytes { target($0) }
            }
            replayed += 1
        }
        return replayed
    }

    /// Each target's regression inputs, then its seeds. A target without seeds is an error: a
    /// renamed target or directory would otherwise replay nothing and pass.
    @Test(arguments: FuzzTargets.all.map(\.name))
    func everyRegressionAndSeedPasses(_ name: String) throws {
        let target = try #require(FuzzTargets.named(name))
        defer { Fuzz.removeScratchDirectory() }
        if let regressions = Self.inputs(in: "\(Self.fuzzDirectory)/regressions/\(name)") {
            let replayed = try Self.replay(regressions, through: target)
            #expect(replayed == regressions.count, "regression inputs of \(name)")
        }
        guard let seeds = Self.inputs(in: "\(Self.fuzzDirectory)/corpus/\(name)") else {
            Issue.record("no seed corpus Fuzz/corpus/\(name)")
            return
        }
        let replayed = try Self.replay(seeds, through: target)
        #expect(replayed > 0, "no seeds in Fuzz/corpus/\(name)")
        #expect(replayed == seeds.count, "seeds of \(name)")
    }

    /// Every directory of inputs belongs to a target, and every target has its libFuzzer
    /// executable in the Fuzz package: inputs of a name the table lacks would never be replayed.
    @Test func everyInputDirectoryAndExecutableMatchesATarget() throws {
        let names = Set(FuzzTargets.all.map(\.name))
        #expect(names.count == FuzzTargets.all.count, "a target name twice")
        for kind in ["corpus", "regressions"] {
            let directory = "\(Self.fuzzDirectory)/\(kind)"
            for entry in try FileManager.default.contentsOfDirectory(atPath: directory) {
                var isDirectory: ObjCBool = false
                _ = FileManager.default.fileExists(atPath: "\(directory)/\(entry)", isDirectory: &isDirectory)
                if isDirectory.boolValue { #expect(names.contains(entry), "Fuzz/\(kind)/\(entry) is no target's") }
            }
        }
        let manifest = try String(contentsOfFile: "\(Self.fuzzDirectory)/Package.swift", encoding: .utf8)
        for name in names {
            #expect(manifest.contains("\"\(name)\""), "Fuzz/Package.swift has no executable \(name)")
            #expect(
                FileManager.default.fileExists(atPath: "\(Self.fuzzDirectory)/Sources/\(name)/Main.swift"),
                "no Fuzz/Sources/\(name)/Main.swift")
        }
    }
}

import DiffcastCore
import DiffcastWire

@testable import DiffcastEngine
@testable import DiffcastStorage

extension FuzzTargets {
    /// A state directory's `checkpoint.json`, as recovery reads it (`StateStore.recover`):
    /// `CheckpointFile.decode` checks the trailer (CRC-32 and length) and decodes every collection
    /// (digest checked, history changesets rebuilt), then `ApplyEngine.restore` rebuilds each. A
    /// checkpoint that decodes is then put in a state directory with the (empty) log after it and
    /// recovered as the daemon starts (`recoverAndGoOn`: a logged write to each collection, a
    /// checkpoint, a restart to the same state).
    ///
    /// Input: a mode byte, then the file, then optionally a NUL byte and the log after it. Mode bit
    /// 0 clear: the file as it is. Set: the file's body, to which its correct trailer line
    /// (`crc32 … bytes …`) is added, so that the fuzzer reaches the JSON. The log is NUL-separated
    /// payloads, framed as the daemon frames records (valid checksums, sequence numbers from the
    /// checkpoint's `next_sequence`), in the log file after the one the checkpoint covers.
    public static func checkpointFile(_ input: UnsafeRawBufferPointer) {
        guard let mode = input.first else { return }
        let parts = Fuzz.parts(input.dropFirst(), separator: 0)
        var file = parts[0]
        if mode & 1 != 0 {
            let checksum = String(CRC32.checksum(file), radix: 16)
            let padded = String(repeating: "0", count: 8 - checksum.count) + checksum
            file.append(contentsOf: "crc32 \(padded) bytes \(file.count)\n".utf8)
        }
        let contents: CheckpointFile.Contents
        do {
            contents = try CheckpointFile.decode(file, path: "checkpoint.json")
        } catch {
            return
        }
        let directory = Fuzz.scratchDirectory()
        Fuzz.write(file, to: directory + "/checkpoint.json")
        var log: [UInt8] = []
        var sequence = contents.nextSequence
        for payload in parts.dropFirst() {
            LogFrame.encode(sequence: sequence, payload: payload, into: &log)
            sequence &+= 1
        }
        let covered = contents.coveredGeneration
        Fuzz.write(log, to: directory + "/wal-\(covered == .max ? covered : covered + 1).log")
        recoverAndGoOn(directory)
    }
}

import DiffcastCore
import DiffcastWire

@testable import DiffcastEngine
@testable import DiffcastStorage

extension FuzzTargets {
    /// A state directory holding write-ahead-log files, recovered as `diffcastd --state-dir` starts:
    /// `StateStore.recover` reads every `wal-N.log` (`LogFrame` records, their sequence numbers, a
    /// torn tail), decodes each payload (`LogRecord.records(inPayload:)`) and replays it into the
    /// engine. Recovery must either throw or give a state the daemon can go on with
    /// (`recoverAndGoOn`: a logged write to each collection, a checkpoint, a restart to the same state).
    ///
    /// Input: a mode byte, then the log.
    /// - mode bit 0 clear: the bytes of `wal-1.log` as they are (checksums and all).
    /// - mode bit 0 set: payloads separated by NUL bytes, each framed as the daemon frames a
    ///   record (valid checksums, sequence numbers 1, 2, …), so the fuzzer reaches the payloads;
    ///   bit 1: the last part is left unframed (a torn tail); bit 2: the frames are split over
    ///   `wal-1.log` and `wal-2.log`; bit 3: the sequence numbers start at 2 (a gap).
    public static func walFile(_ input: UnsafeRawBufferPointer) {
        guard let mode = input.first else { return }
        let directory = Fuzz.scratchDirectory()
        if mode & 1 == 0 {
            Fuzz.write(Array(input.dropFirst()), to: directory + "/wal-1.log")
        } else {
            var payloads = Fuzz.parts(input.dropFirst(), separator: 0)
            let tail = mode & 2 != 0 ? payloads.popLast() : nil
            var files: [[UInt8]] = [[]]
            var sequence: UInt64 = mode & 8 != 0 ? 2 : 1
            for (index, payload) in payloads.enumerated() {
                if mode & 4 != 0, index == payloads.count / 2, index > 0 { files.append([]) }
                LogFrame.encode(sequence: sequence, payload: payload, into: &files[files.count - 1])
                sequence += 1
            }
            if let tail { files[files.count - 1].append(contentsOf: tail) }
            for (index, file) in files.enumerated() {
                Fuzz.write(file, to: directory + "/wal-\(index + 1).log")
            }
        }
        recoverAndGoOn(directory)
    }
}

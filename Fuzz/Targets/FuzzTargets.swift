/// The fuzz targets: one function per place the daemon takes bytes from outside, run on one
/// input. Each feeds the bytes to the daemon's own code as it reads them there, and checks what
/// comes out with oracles (its doc comment names them); a broken oracle, like any trap in the code
/// under test, ends the process.
///
/// Two runners share them: the libFuzzer executables of the Fuzz package (Fuzz/Package.swift,
/// built by scripts/fuzz.sh with `-sanitize=fuzzer,address`), which grow new inputs from the
/// seeds, and `make test` (`DiffcastFuzzReplayTests`), which replays every committed input of
/// `Fuzz/regressions/<name>/` and `Fuzz/corpus/<name>/` in a debug build of this package.
///
/// The bodies `@testable import` what the daemon keeps internal, so this module builds only where
/// those modules are compiled for testing: debug builds, and the Fuzz package's builds
/// (`-enable-testing`). Release builds of the root package name their products (`--product`),
/// none of which contains it; a `swift build -c release` of every target fails on it.
public enum FuzzTargets {
    /// Every target by name: the name of its libFuzzer executable and of its directories in
    /// `Fuzz/corpus/` and `Fuzz/regressions/`.
    public static let all: [(name: String, run: @Sendable (UnsafeRawBufferPointer) -> Void)] = [
        ("request_line", requestLine),
        ("request_apply", requestApply),
        ("wal_file", walFile),
        ("checkpoint_file", checkpointFile),
        ("shared_log_message", sharedLogMessage),
        ("shared_log_snapshot", sharedLogSnapshot),
        ("forward", forward),
        ("event_line", eventLine),
        ("config_file", configFile),
        ("http_request", httpRequest),
        ("websocket_frames", webSocketFrames),
        ("token", token),
    ]

    /// The target called `name`, if there is one.
    public static func named(_ name: String) -> (@Sendable (UnsafeRawBufferPointer) -> Void)? {
        all.first { $0.name == name }?.run
    }
}

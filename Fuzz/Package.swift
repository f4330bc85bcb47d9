// swift-tools-version: 6.0
// Coverage-guided fuzzing (libFuzzer) of every place diffcastd takes bytes from outside: one
// executable per fuzz target, whose body is in the root package (`DiffcastFuzzTargets`,
// Fuzz/Targets/, which `make test` replays the committed inputs through). A package of its own,
// so that the root package's build neither links libFuzzer nor needs -sanitize=fuzzer. Build
// and run with ../scripts/fuzz.sh (or `make fuzz`); see Fuzz/README.md.
import PackageDescription

/// One libFuzzer binary per entry point, named as in `FuzzTargets.all` (Fuzz/Targets/, in the root
/// package): each defines `LLVMFuzzerTestOneInput`, which runs the target's body, and a `@main`
/// that hands it to libFuzzer's driver (`LibFuzzer.main`).
let fuzzTargets = [
    "request_line", "request_apply", "wal_file", "checkpoint_file", "shared_log_message",
    "shared_log_snapshot", "forward", "event_line", "config_file", "http_request", "websocket_frames", "token",
]

let package = Package(
    name: "DiffcastFuzz",
    dependencies: [
        .package(name: "Diffcast", path: "..")
    ],
    targets: [
        // libFuzzer's driver entry point, for the targets' `main` (see its header).
        .target(name: "CFuzzerDriver"),
        // The targets' `main`: libFuzzer's driver on the process's arguments.
        .target(name: "FuzzDriver", dependencies: ["CFuzzerDriver"]),
    ]
        + fuzzTargets.map { name in
            .executableTarget(
                name: name,
                dependencies: ["FuzzDriver", .product(name: "DiffcastFuzzing", package: "Diffcast")]
            )
        },
    swiftLanguageModes: [.v6]
)

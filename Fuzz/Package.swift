// swift-tools-version: 6.0
// Coverage-guided fuzz targets (libFuzzer) for every place diffcastd takes bytes from outside.
// A package of its own, so that the root package's `swift build` neither builds nor depends on
// any of this. Build and run with ../scripts/fuzz.sh (or `make fuzz`); see Fuzz/README.md.
import PackageDescription

/// One libFuzzer binary per entry point: each defines `LLVMFuzzerTestOneInput`, and a `@main`
/// that hands it to libFuzzer's driver (`Fuzz.main`).
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
        // What the targets share: input splitting, a backbone stand-in, and the oracles.
        .target(
            name: "FuzzSupport",
            dependencies: [
                "CFuzzerDriver",
                .product(name: "DiffcastCore", package: "Diffcast"),
                .product(name: "DiffcastFuzzing", package: "Diffcast"),
            ]
        )
    ]
        + fuzzTargets.map { name in
            .executableTarget(
                name: name,
                dependencies: [
                    "FuzzSupport", .product(name: "DiffcastCore", package: "Diffcast"),
                    .product(name: "DiffcastFuzzing", package: "Diffcast"),
                ]
            )
        },
    swiftLanguageModes: [.v6]
)

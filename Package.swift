// swift-tools-version: 6.0
import PackageDescription

// The daemon's engine and server, built for release, skip dynamic exclusivity checks: every
// access to a class's stored property would otherwise call swift_beginAccess, several times per
// feed append (`scripts/instructions.sh` counts the cost).
// Static checks stay on, and debug builds, which the tests run, keep the dynamic ones too. The
// modules a client links (DiffcastCore, DiffcastWire, DiffcastClient) carry no unsafe flag, so
// the client library stays usable as a versioned dependency.
let daemonHotPath: [SwiftSetting] = [.unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))]

// Debug builds, which the tests and the fuzz targets run, check the invariants of the types that
// hold unsafe memory or counts the hot path trusts (their `checkInvariants()`, and the bounds of
// `ItemBuffer.Pinned`), after every change; release builds leave the checks out.
let internalChecks: SwiftSetting = .define("DIFFCAST_INTERNAL_CHECKS", .when(configuration: .debug))

let package = Package(
    name: "Diffcast",
    products: [
        .executable(name: "diffcastd", targets: ["diffcastd"]),
        .executable(name: "diffcast", targets: ["diffcast"]),
        .library(name: "DiffcastCore", targets: ["DiffcastCore"]),
        .library(name: "DiffcastClient", targets: ["DiffcastClient"]),
        // The fuzz targets' bodies, for the libFuzzer executables in Fuzz/ (a package of its own
        // that depends on this one by path): a package sees another's modules only as products.
        .library(name: "DiffcastFuzzing", targets: ["DiffcastFuzzTargets"]),
    ],
    dependencies: [
        // Command-line parsing of diffcastd and the benchmarks.
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        // Structured logging to stderr, which journald picks up under systemd.
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        // The configuration file (YAML, decoded with Codable).
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
        // Prometheus text for --metrics (counters, gauges, histograms; thread-safe).
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // Capability tokens (contract 4): JWS signatures checked and made by a kept JOSE
        // library on swift-crypto (HS256, RS256, ES256, EdDSA), never by hand.
        .package(url: "https://github.com/vapor/jwt-kit", from: "5.8.0"),
        // base64url of token parts and `oct` keys (what JWTKit itself decodes with).
        .package(url: "https://github.com/swift-extras/swift-extras-base64", from: "1.2.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CLibUV",
            pkgConfig: "libuv",
            providers: [.apt(["libuv1-dev"])]
        ),
        // The HTTP front end's C libraries: http_parser, wslay (WebSocket framing), libcrypto.
        .systemLibrary(
            name: "CHTTP",
            providers: [.apt(["libhttp-parser-dev", "libwslay-dev", "libssl-dev"])]
        ),
        .systemLibrary(
            name: "CNATS",
            pkgConfig: "libnats",
            providers: [.apt(["libnats-dev"])]
        ),
        // POSIX and glibc helpers Swift's Glibc does not reach, apart from libuv's module.
        .systemLibrary(name: "CSystem"),
        // The commit a binary was built from (a C define that `make` sets; "unknown" otherwise).
        .target(name: "CBuildInfo"),
        // A cache prefetch hint, which Swift has no spelling for: the full diff's table lookups.
        .systemLibrary(name: "CPrefetch"),
        .target(name: "DiffcastCore", dependencies: ["CPrefetch"], swiftSettings: [internalChecks]),
        .target(name: "DiffcastWire", dependencies: ["DiffcastCore"]),
        // HTTP/1.1, Server-Sent Events and WebSocket framing, the routes of the HTTP API, and the
        // page and script it serves: codecs without sockets, which the server's connections use.
        .target(name: "DiffcastHTTP", dependencies: ["DiffcastWire", "CHTTP"]),
        // A client of the daemon: a connection (pipelined requests, events), and a follower that
        // keeps verified mirrors of collections across divergences and reconnects.
        .target(name: "DiffcastClient", dependencies: ["DiffcastCore", "DiffcastWire"]),
        // The single source of truth without I/O: jobs in, outcomes out (responses, events, log
        // records); the shared log's side of a batch, and the backbone it needs, as a protocol.
        .target(
            name: "DiffcastEngine",
            dependencies: ["DiffcastCore", "DiffcastWire", "CSystem", .product(name: "Logging", package: "swift-log")],
            swiftSettings: daemonHotPath
        ),
        // The state directory: the write-ahead log and checkpoints, recovered into an engine.
        .target(
            name: "DiffcastStorage",
            dependencies: [
                "DiffcastCore", "DiffcastWire", "DiffcastEngine", .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Who may do what (contract 4): key sets, token verification, the one decision every
        // transport asks, the throttle on failed tokens, and minting tokens for scripts.
        .target(
            name: "DiffcastAccess",
            dependencies: [
                "DiffcastWire", .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "ExtrasBase64", package: "swift-extras-base64"),
            ]
        ),
        // The libuv edge: listeners, connections and their transports, the apply queue's thread,
        // fan-out to subscribers, supervision (systemd, SIGHUP, metrics).
        .target(
            name: "DiffcastServer",
            dependencies: [
                "DiffcastCore", "DiffcastWire", "DiffcastHTTP", "DiffcastEngine", "DiffcastAccess", "CLibUV", "CSystem",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: daemonHotPath + [internalChecks]
        ),
        // Daemons sharing collections through NATS JetStream (--backbone): the shared log, leases,
        // forwarding to owners.
        .target(
            name: "DiffcastBackbone",
            dependencies: [
                "DiffcastEngine", "DiffcastWire", "CNATS", .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "DiffcastConfiguration",
            dependencies: [
                "DiffcastCore", "DiffcastWire", "DiffcastStorage", "DiffcastAccess", "DiffcastBackbone",
                .product(name: "Yams", package: "Yams"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "diffcastd",
            dependencies: [
                "DiffcastEngine", "DiffcastStorage", "DiffcastServer", "DiffcastConfiguration", "DiffcastBackbone",
                "CBuildInfo",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The `diffcast` command: every op from a shell, `sub` printing verified changes.
        .executableTarget(
            name: "diffcast",
            dependencies: [
                "DiffcastClient", "DiffcastAccess", "CBuildInfo",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "DiffcastBenchmarks",
            dependencies: [
                "BenchmarkFixtures", "DiffcastCore", "DiffcastWire", "DiffcastEngine", "DiffcastAccess", "CReader",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Benchmarks/DiffcastBenchmarks"
        ),
        .target(
            name: "BenchmarkFixtures", dependencies: ["DiffcastEngine", "DiffcastWire"],
            path: "Benchmarks/BenchmarkFixtures"),
        // Allocations per version (`make bench BENCH=allocations`), counted by a malloc family
        // that stands in front of glibc's in this executable only.
        .target(name: "CMallocCounter", path: "Benchmarks/CMallocCounter"),
        // The fan-out benchmark's reader: epoll (Glibc's module leaves it out) and a raw recv.
        .systemLibrary(name: "CReader", path: "Benchmarks/CReader"),
        .executableTarget(
            name: "DiffcastAllocations",
            dependencies: ["BenchmarkFixtures", "CMallocCounter", "DiffcastCore", "DiffcastEngine", "DiffcastWire"],
            path: "Benchmarks/DiffcastAllocations"
        ),
        // The fuzz targets (Fuzz/README.md): for each place the daemon takes bytes from outside,
        // a function that runs one input through the daemon's code, with oracles. libFuzzer runs
        // them in Fuzz/ (`make fuzz`), DiffcastFuzzReplayTests on every committed input. They
        // `@testable import` the daemon's modules, so they build in debug or with -enable-testing
        // only: release builds name their products (`--product`), and none contains them.
        .target(
            name: "DiffcastFuzzTargets",
            dependencies: [
                "DiffcastCore", "DiffcastWire", "DiffcastClient", "DiffcastHTTP", "DiffcastEngine", "DiffcastStorage",
                "DiffcastServer", "DiffcastBackbone", "DiffcastConfiguration", "DiffcastAccess",
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Fuzz/Targets"
        ),
        // The tests' own oracles (reference digest, strict changeset applier, move law) and a
        // seeded generator, written apart from the code they check; used by every test target.
        .target(name: "DiffcastTestSupport", dependencies: ["DiffcastCore", "DiffcastWire"], path: "Tests/DiffcastTestSupport"),
        // The real daemon for integration tests: started on a socket of its own, and a blocking
        // line client (as a script would talk to it).
        .target(name: "DiffcastTestDaemon", dependencies: ["DiffcastWire"], path: "Tests/DiffcastTestDaemon"),
        .testTarget(name: "DiffcastCoreTests", dependencies: ["DiffcastCore", "DiffcastTestSupport"]),
        .testTarget(name: "DiffcastWireTests", dependencies: ["DiffcastWire", "DiffcastTestSupport"]),
        .testTarget(
            name: "DiffcastConfigurationTests",
            dependencies: ["DiffcastConfiguration", "DiffcastServer", "DiffcastWire", "DiffcastAccess"]),
        .testTarget(name: "DiffcastHTTPTests", dependencies: ["DiffcastHTTP"]),
        .testTarget(name: "DiffcastAccessTests", dependencies: ["DiffcastAccess", "DiffcastWire"]),
        .testTarget(
            name: "DiffcastServerTests",
            dependencies: [
                "DiffcastServer", "DiffcastAccess", "DiffcastEngine", "DiffcastStorage", "DiffcastWire", "DiffcastClient",
                "DiffcastTestSupport", "DiffcastTestDaemon",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "DiffcastEngineTests",
            dependencies: [
                "DiffcastEngine", "DiffcastWire", "DiffcastClient", "DiffcastTestSupport",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "DiffcastStorageTests",
            dependencies: [
                "DiffcastStorage", "DiffcastEngine", "DiffcastWire", "DiffcastTestSupport",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "DiffcastClientTests", dependencies: ["DiffcastClient", "DiffcastTestDaemon", "DiffcastTestSupport"]),
        .testTarget(name: "DiffcastBackboneTests", dependencies: ["DiffcastBackbone", "DiffcastEngine"]),
        .testTarget(name: "DiffcastFuzzReplayTests", dependencies: ["DiffcastFuzzTargets"]),
    ],
    swiftLanguageModes: [.v6]
)

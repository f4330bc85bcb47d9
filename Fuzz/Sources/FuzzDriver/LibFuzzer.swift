import CFuzzerDriver

#if canImport(Glibc)
    import Glibc
#endif

/// The one part of a fuzz target that needs libFuzzer: its driver. The targets' bodies are in
/// the root package (`DiffcastFuzzTargets`, Fuzz/Targets/), where `make test` replays them too.
public enum LibFuzzer {
    /// Runs libFuzzer with the process's arguments on `test` (a target's `LLVMFuzzerTestOneInput`).
    public static func main(_ test: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt) -> Never {
        var argc = CommandLine.argc
        var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv, test))
    }
}

import DiffcastFuzzTargets
import FuzzDriver

/// `FuzzTargets.sharedLogMessage` on what libFuzzer hands it.
@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    FuzzTargets.sharedLogMessage(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}

@main enum Main {
    static func main() { LibFuzzer.main(testOneInput) }
}

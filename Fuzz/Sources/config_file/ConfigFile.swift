import DiffcastConfiguration
import DiffcastServer
import FuzzSupport

/// The configuration file, as `diffcastd --config` reads it at start and on SIGHUP: UTF-8 text
/// (`String(contentsOfFile:encoding: .utf8)`), `DaemonSettings.load` (Yams, every key checked),
/// `ValidatedSettings` (every value checked), and the restart check of a reload.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard let text = String(validating: UnsafeBufferPointer(start: data, count: size), as: UTF8.self) else {
        return 0
    }
    guard let settings = try? DaemonSettings.load(yaml: text, from: "diffcastd.yaml") else { return 0 }
    _ = try? ValidatedSettings(settings)
    _ = ValidatedSettings.changesNeedingRestart(from: DaemonSettings(), to: settings)
    return 0
}

@main enum Main {
    static func main() { Fuzz.main { data, size in fuzz(data!, size) } }
}

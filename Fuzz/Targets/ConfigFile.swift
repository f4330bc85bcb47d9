import DiffcastConfiguration

extension FuzzTargets {
    /// The configuration file, as `diffcastd --config` reads it at start and on SIGHUP: UTF-8 text
    /// (`String(contentsOfFile:encoding: .utf8)`), `DaemonSettings.load` (Yams, every key checked),
    /// `ValidatedSettings` (every value checked), and the restart check of a reload. The same
    /// text, split at spaces, as the settings' command-line options.
    public static func configFile(_ input: UnsafeRawBufferPointer) {
        guard let text = String(validating: input, as: UTF8.self) else { return }
        var byOptions = DaemonSettings()
        if (try? byOptions.apply(options: text.split(separator: " ").map(String.init))) != nil {
            _ = try? ValidatedSettings(byOptions)
        }
        guard let settings = try? DaemonSettings.load(yaml: text, from: "diffcastd.yaml") else { return }
        _ = try? ValidatedSettings(settings)
        _ = DaemonSettings.changesNeedingRestart(from: DaemonSettings(), to: settings)
    }
}

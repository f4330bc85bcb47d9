import ArgumentParser
import DiffcastClient
import Foundation

struct Subscribe: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sub",
        abstract: "Follow collections: print every change, verified against the daemon's digest.",
        discussion: """
            Keeps a mirror of each collection and checks the digest of every version. After a
            divergence it subscribes again (a snapshot follows); after a lost connection it
            reconnects and resumes from the version it holds. Notices go to stderr.
            """)

    @OptionGroup var options: ConnectionOptions
    @Argument(help: "The collections to follow.") var collections: [String]
    @Option(help: "Resume from this version (with --epoch): one changeset instead of a snapshot.")
    var since: UInt64?
    @Option(help: "The epoch the --since version belongs to.") var epoch: String?
    @Option(help: "Exit after this many events.") var count: Int?
    @Option(help: "Items of a snapshot to print (the rest are counted).") var snapshotItems = 50

    func validate() throws {
        guard (since == nil) == (epoch == nil) else { throw ValidationError("--since and --epoch go together") }
        guard !collections.isEmpty else { throw ValidationError("name at least one collection") }
    }

    func run() async throws {
        let endpoint = try options.endpoint()
        var resume: [String: Follower.Position] = [:]
        if let since, let epoch {
            for name in collections { resume[name] = .init(version: since, epoch: epoch) }
        }
        let follower = Follower(
            endpoint: endpoint, token: options.resolvedToken,
            collections: collections, resume: resume)
        var mirrors: [String: CollectionMirror] = [:]
        var events = 0
        let style = Style.forStandardOutput
        do {
            for try await update in follower.updates() {
                let name = update.collection ?? ""
                switch update.change {
                case .disconnected(let why):
                    notice("\(why); reconnecting")
                case .subscribed(let version):
                    notice("subscribed to \(name) at version \(version)")
                case .diverged(let why):
                    notice("\(name) diverged (\(why)); subscribing again")
                case .snapshot(let raw), .changed(_, let raw):
                    if options.json {
                        print(raw.canonicalText)
                    } else {
                        print(describe(update, previous: mirrors[name], style: style))
                    }
                    events += 1
                case .dropped:
                    print(
                        options.json
                            ? #"{"event":"dropped","collection":\#(JSONValue.string(name).canonicalText)}"#
                            : "\(style.bold(name)) dropped")
                    events += 1
                }
                mirrors[name] = update.mirror
                fflush(nil)
                if let count, events >= count { return }
            }
        } catch let error as ClientError {
            throw ConnectionOptions.exit(for: error)
        }
    }

    private func describe(_ update: Follower.Update, previous: CollectionMirror?, style: Style) -> String {
        let mirror = update.mirror
        let name = update.collection ?? ""
        let header = "\(style.bold(name)) v\(mirror.version.map(String.init) ?? "?")"
        let digest = style.dim("digest \(Digest(of: mirror.snapshot)) ok")
        switch update.change {
        case .snapshot:
            let lines = Text.outline(mirror.sections, style: style, limit: snapshotItems)
            return (["\(header) snapshot, epoch \(mirror.epoch ?? "?")  \(digest)"] + lines).joined(separator: "\n")
        case .changed(let changeset, _):
            let oldData = Self.data(of: changeset.items.updated.map(\.id), in: previous?.snapshot)
            let lines = Text.changes(changeset, previous: { oldData[$0] }, style: style)
            return (["\(header)  \(digest)"] + lines).joined(separator: "\n")
        default:
            return header
        }
    }

    /// The data of the named items in a state (one walk, only when something was updated).
    private static func data(of ids: [Identifier], in snapshot: Snapshot?) -> [Identifier: JSONText] {
        guard !ids.isEmpty, let snapshot else { return [:] }
        let wanted = Set(ids)
        var found: [Identifier: JSONText] = [:]
        for section in snapshot.sections {
            for item in section.items where wanted.contains(item.id) {
                found[item.id] = item.data
            }
        }
        return found
    }

    private func notice(_ text: String) {
        FileHandle.standardError.write(Data("diffcast: \(text)\n".utf8))
    }
}

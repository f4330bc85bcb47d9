import ArgumentParser
import DiffcastClient
import Foundation

struct Subscribe: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sub",
        abstract: "Follow collections: print every change, verified against the daemon's digest.",
        discussion: """
            Keeps a mirror of each collection and checks the digest of every version. After a \
            divergence it subscribes again (a snapshot follows); after a lost connection it \
            reconnects and resumes from the version it holds; after a drop it says so and \
            follows the collection again when it is created anew. Notices go to stderr.

            With --state FILE the mirrors are kept in FILE, rewritten after every version, and \
            a later `diffcast sub` with the same FILE resumes from them: the daemon sends one \
            changeset from the version kept (a snapshot only when its history does not reach \
            back that far), verified like every other.

            With --first N, --last N or --anchor ID (with --before B and --after A), each \
            collection is followed through that window: only the items a screen would show, an \
            event only for a version that changes them, verified against the view's digest. An \
            anchor window follows its item as it moves, and passes on when it is deleted.
            """)

    @OptionGroup var options: ConnectionOptions
    @Argument(help: "The collections to follow.") var collections: [String]
    @Option(
        help: ArgumentHelp(
            "Keep the verified mirrors in this file, and resume from what it holds.", valueName: "file"))
    var state: String?
    @Option(help: "Exit after this many events.") var count: Int?
    @Option(help: "Items of a snapshot to print (the rest are counted).") var snapshotItems = 50
    @OptionGroup var windowOptions: WindowOptions

    func validate() throws {
        guard !collections.isEmpty else { throw ValidationError("name at least one collection") }
        if try windowOptions.window() != nil, state != nil {
            throw ValidationError("--state keeps whole collections: a window starts anew with its view every time")
        }
    }

    func run() async throws {
        var mirrors: [String: CollectionMirror] = [:]
        var keeper: MirrorKeeper?
        if let state {
            var file = try StateFile(path: state)
            mirrors = resumable(from: &file)
            do {
                try file.write()
            } catch {
                throw ValidationError("--state: \(error)")
            }
            keeper = MirrorKeeper(file)
        }
        let follower = Follower(
            endpoint: try options.endpoint(), token: options.resolvedToken, collections: collections,
            resume: mirrors, window: try windowOptions.window())
        var events = 0
        let style = Style.forStandardOutput
        do {
            for try await update in follower.updates() {
                let name = update.collection ?? ""
                switch update.change {
                case .disconnected(let why):
                    notice("\(why); reconnecting")
                case .subscribed(let version):
                    notice(subscribedNotice(name, version: version, held: update.mirror.version))
                case .diverged(let why):
                    notice("\(name) diverged (\(why)); subscribing again")
                case .snapshot(let raw), .changed(_, let raw):
                    keeper?.keep(update.mirror, of: name)
                    print(options.json ? raw.canonicalText : describe(update, previous: mirrors[name], style: style))
                    events += 1
                case .dropped:
                    keeper?.keep(nil, of: name)
                    print(
                        options.json
                            ? #"{"event":"dropped","collection":\#(JSONValue.string(name).canonicalText)}"#
                            : "\(style.bold(name)) dropped")
                    events += 1
                }
                if update.collection != nil { mirrors[name] = update.mirror }
                fflush(nil)
                if let count, events >= count { return }
            }
        } catch let error as ClientError {
            throw options.fail(error)
        }
    }

    /// The verified mirrors of the followed collections that the state file holds; one that does
    /// not verify is reported and followed from a snapshot.
    private func resumable(from file: inout StateFile) -> [String: CollectionMirror] {
        var mirrors: [String: CollectionMirror] = [:]
        for (name, held) in file.takeMirrors(of: collections) {
            switch held {
            case .success(let mirror):
                mirrors[name] = mirror
                notice(
                    "resuming \(name) from version \(mirror.version.map(String.init) ?? "?") "
                        + "(epoch \(mirror.epoch ?? "?")) kept in \(file.path)")
            case .failure(let divergence):
                notice("\(file.path): the mirror of \(name) does not verify (\(divergence)); following it anew")
            }
        }
        return mirrors
    }

    /// What a subscription's version means: version 0 is a collection nobody has written yet (as
    /// a mistyped name is), which `subscribe` has just made.
    private func subscribedNotice(_ name: String, version: UInt64, held: UInt64?) -> String {
        if version == 0 {
            return "collection '\(name)' does not exist yet; waiting for its first write"
        }
        if held == version {
            return "subscribed to \(name) at version \(version): the mirror kept is current"
        }
        return "subscribed to \(name) at version \(version)"
    }

    private func describe(_ update: Follower.Update, previous: CollectionMirror?, style: Style) -> String {
        let mirror = update.mirror
        let name = update.collection ?? ""
        var header = "\(style.bold(name)) v\(mirror.version.map(String.init) ?? "?")"
        if let window = mirror.window {
            let range = window.range
            let rows = range.count == 0 ? "no items" : "items \(range.lower + 1)-\(range.upper)"
            let anchor = window.isAnchored ? ", anchor \(window.anchor?.text ?? "none")" : ""
            header += " [\(rows) of \(range.total)\(anchor)]"
        }
        let digest = style.dim("digest \(Digest(of: mirror.snapshot)) ok")
        switch update.change {
        case .snapshot:
            let lines = Text.outline(mirror.sections, style: style, limit: snapshotItems)
            return (["\(header) snapshot, epoch \(mirror.epoch ?? "?")  \(digest)"] + lines).joined(separator: "\n")
        case .changed(let changeset, let raw):
            let oldData = Self.data(of: changeset.items.updated.map(\.id), in: previous?.snapshot)
            let lines = Text.changes(changeset, previous: { oldData[$0] }, style: style)
            // A window skips the versions that leave its view as it was: a gap is no catch-up there.
            let span = mirror.window == nil ? Self.catchUp(raw, to: mirror.version) : ""
            return (["\(header)\(span)  \(digest)"] + lines).joined(separator: "\n")
        default:
            return header
        }
    }

    /// ` (from vN)` for a changeset that spans several versions (a catch-up), else nothing.
    private static func catchUp(_ event: JSONValue, to version: UInt64?) -> String {
        guard case .number(let text) = event["from"], let from = UInt64(text), let version, version != from + 1
        else { return "" }
        return " (from v\(from))"
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
}

/// Says something on stderr, after `diffcast: `.
func notice(_ text: String) {
    FileHandle.standardError.write(Data("diffcast: \(text)\n".utf8))
}

/// Keeps `sub`'s mirrors in its state file after every version. A failed write is said once (and
/// its end once): FILE still holds the last version written, from which a later `sub` resumes
/// just as well.
private struct MirrorKeeper {
    var file: StateFile
    var failing = false

    init(_ file: StateFile) {
        self.file = file
    }

    mutating func keep(_ mirror: CollectionMirror?, of name: String) {
        do {
            try file.store(mirror, of: name)
            if failing { notice("\(file.path) is written again") }
            failing = false
        } catch {
            if !failing { notice("\(error); \(file.path) keeps an earlier version") }
            failing = true
        }
    }
}

/// `--first N`, `--last N` or `--anchor ID` with `--before B` and `--after A`: a window of each
/// collection (SPEC.md "Windows") instead of all of it.
struct WindowOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Only the first N items.", valueName: "n")) var first: Int?
    @Option(help: ArgumentHelp("Only the last N items.", valueName: "n")) var last: Int?
    @Option(help: ArgumentHelp("Only the item ID and the items around it.", valueName: "id")) var anchor: String?
    @Option(help: ArgumentHelp("Items before the anchor (with --anchor).", valueName: "b")) var before: Int?
    @Option(help: ArgumentHelp("Items after the anchor (with --anchor).", valueName: "a")) var after: Int?

    func validate() throws {
        _ = try window()
    }

    /// The window the flags ask for, or nil (the daemon checks the counts against its limits).
    func window() throws -> Window? {
        let forms = [first.map { _ in "--first" }, last.map { _ in "--last" }, anchor.map { _ in "--anchor" }]
            .compactMap { $0 }
        guard forms.count <= 1 else {
            throw ValidationError("give one of \(forms.joined(separator: ", ")), not several")
        }
        if anchor == nil, before != nil || after != nil {
            throw ValidationError("--before and --after go with --anchor ID")
        }
        let counts = [("--first", first, 1), ("--last", last, 1), ("--before", before, 0), ("--after", after, 0)]
        for (flag, value, least) in counts {
            if let value, value < least { throw ValidationError("\(flag) must be at least \(least), got \(value)") }
        }
        if let first { return .first(first) }
        if let last { return .last(last) }
        if let anchor { return .anchor(Identifier(anchor), before: before ?? 0, after: after ?? 0) }
        return nil
    }
}

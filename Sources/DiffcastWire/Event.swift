import DiffcastCore

/// An event line as a value (SPEC.md "Events"), as the daemon publishes it; `WireEncoder.encode`
/// writes it once, and the same bytes go to every subscriber.
public enum Event: Sendable {
    /// The whole state at `version`, or with `window` the view of it that a window shows.
    case snapshot(collection: String, epoch: String, version: UInt64, Snapshot, window: WindowPlace?)
    /// The changes from `from` to `version`; `digest` is the state's at `version` (with
    /// `window`, the view's).
    case changeset(
        collection: String, epoch: String, from: UInt64, version: UInt64, Changeset, digest: Digest,
        window: WindowPlace?)
    case dropped(collection: String)

    public static func snapshot(collection: String, epoch: String, version: UInt64, _ snapshot: Snapshot) -> Event {
        .snapshot(collection: collection, epoch: epoch, version: version, snapshot, window: nil)
    }

    public static func changeset(
        collection: String, epoch: String, from: UInt64, version: UInt64, _ changeset: Changeset, digest: Digest
    ) -> Event {
        .changeset(
            collection: collection, epoch: epoch, from: from, version: version, changeset, digest: digest, window: nil)
    }
}

extension WireEncoder {
    /// The event line.
    public static func encode(_ event: Event) -> [UInt8] {
        switch event {
        case .snapshot(let name, let epoch, let version, let snapshot, nil):
            snapshotEvent(collection: name, epoch: epoch, version: version, snapshot: snapshot)
        case .snapshot(let name, let epoch, let version, let view, let place?):
            windowSnapshotEvent(collection: name, epoch: epoch, version: version, view: view, place: place)
        case .changeset(let name, let epoch, let from, let version, let changeset, let digest, let window):
            changesetEvent(
                collection: name, epoch: epoch, from: from, to: version, changeset: changeset, window: window,
                digest: digest)
        case .dropped(let name):
            droppedEvent(collection: name)
        }
    }
}

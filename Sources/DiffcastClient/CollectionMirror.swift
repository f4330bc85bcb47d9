import DiffcastCore
import DiffcastWire

/// A subscriber's copy of one collection, kept by applying the events it receives with SPEC.md's
/// normative algorithm and checking the digest of every version: the client side of the wire.
///
/// The copy is a chunked `Snapshot`, so a changeset costs what it lists and the digest is
/// recombined from cached chunk digests, never re-hashed item by item.
public struct CollectionMirror: Sendable {
    public private(set) var snapshot = Snapshot()
    public private(set) var version: UInt64?
    public private(set) var epoch: String?
    public private(set) var changesetsApplied = 0
    public private(set) var snapshotsApplied = 0
    /// For a windowed subscription, where the view it holds stands in the collection (from the
    /// last event's `window`); nil for a whole one.
    public private(set) var window: WindowPlace?

    public init() {}

    /// The copy as plain values (a walk of every item: for tests and printing, not per event).
    public var sections: [SectionOutline] { snapshot.outline }

    /// Why an event could not be applied; the mirror should subscribe again without `since`.
    public struct Divergence: Error, CustomStringConvertible {
        public let description: String
    }

    /// What one event did to the mirror.
    public enum Update: Sendable {
        /// The whole state was replaced.
        case snapshot
        /// The changeset, as received, took the mirror from one version to the next: a UI
        /// applies it as one batch update (deletions at old positions, the rest at new ones).
        case changeset(Changeset)
        /// The collection was dropped; the mirror is empty and holds no version.
        case dropped
    }

    /// Applies one event line (already parsed) and says what changed; throws when it does not
    /// fit, leaving the mirror as it was.
    @discardableResult
    public mutating func feed(_ event: JSONValue) throws(Divergence) -> Update {
        let decoded: ReceivedEvent
        do {
            decoded = try EventDecoder.event(event)
        } catch {
            throw Divergence(description: error.description)
        }
        return try feed(decoded)
    }

    /// Applies one decoded event: SPEC.md's normative steps, then the digest check.
    @discardableResult
    public mutating func feed(_ event: ReceivedEvent) throws(Divergence) -> Update {
        let update: Update
        var next: Snapshot
        let nextVersion: UInt64
        let nextWindow: WindowPlace?
        let digest: String?
        var nextEpoch = epoch
        switch event {
        case .snapshot(let version, let epoch, let outline, let window, let eventDigest):
            next = Snapshot(uncheckedSections: outline.map { Section(id: $0.id, data: $0.data, items: $0.items) })
            (nextVersion, nextEpoch, nextWindow, digest) = (version, epoch, window, eventDigest)
            update = .snapshot
        case .changeset(let given, let version, let changeset, let window, let eventDigest):
            guard let current = self.version else {
                throw Divergence(description: "a changeset before any snapshot")
            }
            // A compact changeset says no `from`: it continues from the version held.
            let from = given ?? current
            guard from == current else {
                throw Divergence(description: "chain broken: changeset from \(from) but the mirror holds \(current)")
            }
            do {
                next = try changeset.apply(to: snapshot)
            } catch {
                throw Divergence(description: "changeset \(from)->\(version): \(error)")
            }
            (nextVersion, nextWindow, digest) = (version, window, eventDigest)
            update = .changeset(changeset)
        case .dropped:
            snapshot = Snapshot()
            version = nil
            epoch = nil
            window = nil
            return .dropped
        }
        next.refreshDigests()
        let computed = Digest(of: next)
        guard let digest, digest == computed.description else {
            throw Divergence(description: "digest \(digest ?? "none") but the mirror computes \(computed)")
        }
        snapshot = next
        version = nextVersion
        epoch = nextEpoch
        window = nextWindow
        if case .snapshot = update { snapshotsApplied += 1 } else { changesetsApplied += 1 }
        return update
    }
}

/// The whole subscribers of one collection, kept as a contiguous array of connections: a
/// version's fan-out walks it without a lookup per subscriber (no hash of an id, no probe of the
/// connection table), which is most of what a subscriber's turn costs besides its `write`.
/// Joining and leaving are O(1): a leaving connection's place is taken by the last one.
///
/// Generic over its members so that its tests need no socket; the daemon's are `Connection`s.
struct SubscriberList<Member: AnyObject & Identifiable> {
    /// In no particular order.
    private(set) var members: [Member] = []
    /// Each member's index in `members`.
    private var places: [Member.ID: Int] = [:]

    var count: Int { members.count }
    var isEmpty: Bool { members.isEmpty }

    /// Adds `member`, unless it is a member already.
    mutating func insert(_ member: Member) {
        guard places[member.id] == nil else { return }
        places[member.id] = members.count
        members.append(member)
    }

    /// Removes the member `id`, if there is one.
    mutating func remove(_ id: Member.ID) {
        guard let place = places.removeValue(forKey: id) else { return }
        let last = members.removeLast()
        guard place < members.count else { return }
        members[place] = last
        places[last.id] = place
    }

    var ids: [Member.ID] { members.map(\.id) }
}

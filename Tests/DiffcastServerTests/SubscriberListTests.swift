import DiffcastTestSupport
import Testing

@testable import DiffcastServer

/// The subscribers of a collection, against a `Set` of ids as the model: after any sequence of
/// joins and leaves the list holds each member once, exactly the model's members.
@Suite struct SubscriberListTests {
    final class Member: Identifiable {
        let id: Int
        init(_ id: Int) { self.id = id }
    }

    @Test func joiningTwiceKeepsOneMembershipAndLeavingTwiceIsHarmless() {
        let members = (0..<3).map(Member.init)
        var list = SubscriberList<Member>()
        list.insert(members[0])
        list.insert(members[1])
        list.insert(members[0])
        #expect(list.count == 2)
        list.remove(1)
        list.remove(1)
        list.remove(2)
        #expect(list.ids == [0])
        list.remove(0)
        #expect(list.isEmpty)
    }

    @Test func theLastMemberTakesTheLeaversPlace() {
        let members = (0..<4).map(Member.init)
        var list = SubscriberList<Member>()
        for member in members { list.insert(member) }
        list.remove(1)
        #expect(list.ids == [0, 3, 2])
        // The moved member's new place is known: removing it takes it, not another.
        list.remove(3)
        #expect(list.ids == [0, 2])
    }

    @Test(arguments: [1, 2, 3])
    func randomJoinsAndLeavesMatchASet(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        let members = (0..<40).map(Member.init)
        var list = SubscriberList<Member>()
        var model = Set<Int>()
        for _ in 0..<2_000 {
            let member = members[Int(random.next() % 40)]
            if random.next() % 3 == 0 {
                list.remove(member.id)
                model.remove(member.id)
            } else {
                list.insert(member)
                model.insert(member.id)
            }
            #expect(list.count == model.count)
        }
        #expect(list.ids.sorted() == model.sorted())
        #expect(Set(list.members.map(ObjectIdentifier.init)).count == list.count, "each member once")
    }
}

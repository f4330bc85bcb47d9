/// A pair of water marks on a count that grows and drains (a connection's unsent bytes, its
/// unanswered requests): above `high` the producer is held back (a subscriber skips events, a
/// client is not read); it goes on only once the count is back at `low`, half of `high`, so
/// that a count hovering at the limit does not flip the state at every change.
struct WaterMarks: Equatable {
    /// The count past which the producer is held back.
    var high: Int

    /// The count at or below which a held-back producer goes on.
    var low: Int { high / 2 }

    init(high: Int) {
        self.high = high
    }

    /// Whether `count` is past the high mark.
    func isAbove(_ count: Int) -> Bool { count > high }

    /// Whether `count` has drained to the low mark.
    func hasDrained(_ count: Int) -> Bool { count <= low }
}

import DiffcastAccess
import Testing

/// The entries of a comma-separated list (`publishers`, `subscribers`, `X-Forwarded-For`) lose
/// the spaces around them and keep the ones inside.
@Suite struct AccessListTests {
    @Test(arguments: [
        ("  uid:1000 ", "uid:1000"), ("a b", "a b"), (" a  b ", "a  b"), ("   ", ""), ("", ""), ("x", "x"),
    ])
    func anEntryLosesOnlyTheSpacesAroundIt(text: String, trimmed: String) {
        #expect(text.trimmingWhitespace() == trimmed)
        #expect(Substring(text).trimmingWhitespace() == trimmed)
    }
}

import Glibc
import Testing

@testable import DiffcastServer

/// Addresses made and read back against values written out by hand, and against the kernel: a
/// socket bound through `withSockaddr` reports the address that was made.
@Suite struct SocketAddressTests {
    static let literals: [(String, Int32, String, Int)] = [
        ("127.0.0.1", 8080, "127.0.0.1:8080", 16),
        ("::1", 9, "::1:9", 28),
        ("0.0.0.0", 65535, "0.0.0.0:65535", 16),
    ]

    @Test(arguments: literals)
    func literalsAreReadBackAsTheyWereWritten(_ host: String, _ port: Int32, _ text: String, _ length: Int) throws {
        let address = try #require(SocketAddress(host: host, port: port))
        #expect(address.hostAndPort == text)
        #expect(Int(address.length) == length)
        #expect(!address.isUnix && address.unixPath == nil)
    }

    @Test(arguments: ["localhost", "", "1.2.3", "::g", "[::1]"])
    func namesThatAreNotLiteralsAreRefused(_ host: String) {
        #expect(SocketAddress(host: host, port: 80) == nil)
    }

    @Test func aUnixPathKeepsItsBytesAndAnAbstractOneStartsWithNUL() {
        let path = SocketAddress(unixPath: "/run/diffcast.sock")
        #expect(path.isUnix && path.unixPath == "/run/diffcast.sock" && path.hostAndPort == nil)
        #expect(Int(path.length) == MemoryLayout<sa_family_t>.size + 18)
        let abstract = SocketAddress(unixPath: "@notify")
        #expect(abstract.isUnix && abstract.unixPath == "")
        #expect(Int(abstract.length) == MemoryLayout<sa_family_t>.size + 7)
        let long = SocketAddress(unixPath: String(repeating: "x", count: 500))
        #expect(long.unixPath == String(repeating: "x", count: 107))
    }

    @Test func theKernelReportsTheAddressASocketWasBoundTo() throws {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(descriptor) }
        let wanted = try #require(SocketAddress(host: "127.0.0.1", port: 0))
        #expect(wanted.withSockaddr { bind(descriptor, $0, $1) } == 0)
        let bound = try #require(SocketAddress(boundTo: descriptor))
        let text = try #require(bound.hostAndPort)
        #expect(text.hasPrefix("127.0.0.1:") && text != "127.0.0.1:0")
        #expect(SocketAddress(boundTo: -1) == nil)
    }
}

// The HTTP front end's C libraries: http_parser (HTTP/1.1), wslay (WebSocket framing) and
// OpenSSL's libcrypto (SHA-1 and base64 for the WebSocket handshake). Accessors for
// http_parser's bitfields keep them out of Swift.
#include <http_parser.h>
#include <wslay/wslay.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <string.h>

static inline unsigned dc_http_method(const http_parser *parser) { return parser->method; }
static inline unsigned dc_http_errno(const http_parser *parser) { return parser->http_errno; }
static inline int dc_http_is_upgrade(const http_parser *parser) { return parser->upgrade; }

/// Sec-WebSocket-Accept for a Sec-WebSocket-Key (RFC 6455 4.2.2): base64 of the SHA-1 of the key
/// and the protocol's GUID. `accept` receives 28 characters and a NUL.
static inline void dc_websocket_accept(const char *key, size_t length, char accept[29]) {
    static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    unsigned char input[128 + sizeof guid];
    unsigned char digest[SHA_DIGEST_LENGTH];
    if (length > 128) length = 128;
    memcpy(input, key, length);
    memcpy(input + length, guid, sizeof guid - 1);
    SHA1(input, length + sizeof guid - 1, digest);
    EVP_EncodeBlock((unsigned char *)accept, digest, SHA_DIGEST_LENGTH);
}

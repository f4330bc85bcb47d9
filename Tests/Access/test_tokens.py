"""Which tokens the daemon takes (SPEC "Scoped access": Keys, Tokens, Presenting a token) and
what HTTP answers when it does not."""

import base64
import json
import os
import time

import pytest

from access_support import (TRANSPORTS, AccessDaemon, accepted, claims, forge, hmac_forge, mint, refused,
                            write_jwks)


def swap_payload(token, payload):
    """`token` with its payload replaced, header and signature kept."""
    header, _, signature = token.split(".")
    body = base64.urlsafe_b64encode(json.dumps(payload, separators=(",", ":")).encode()).rstrip(b"=").decode()
    return f"{header}.{body}.{signature}"


def garbage(size):
    raw = base64.urlsafe_b64encode(os.urandom(size)).rstrip(b"=").decode()[:size]
    third = len(raw) // 3
    return f"{raw[:third]}.{raw[third:2 * third]}.{raw[2 * third:]}"


def admin_claims(name):
    payload = claims(read=[name])
    payload["diffcast"]["admin"] = True
    return payload


#: name -> function(keys, read) giving a token the daemon must refuse, each claiming read [read].
BAD_TOKENS = {
    "alg-none": lambda k, r: forge({"alg": "none", "typ": "JWT", "kid": "rs-1"}, claims(read=[r])),
    "alg-none-without-kid": lambda k, r: forge({"alg": "none", "typ": "JWT"}, claims(read=[r])),
    "alg-none-with-a-valid-signature-kept": lambda k, r: (
        forge({"alg": "none", "typ": "JWT"}, claims(read=[r])).rsplit(".", 1)[0] + "."
        + mint(k["rs"], read=[r]).rsplit(".", 1)[1]),
    "hs256-with-the-rsa-public-key-as-secret": lambda k, r: hmac_forge(
        {"alg": "HS256", "typ": "JWT", "kid": "rs-1"}, claims(read=[r]), k["rs"].public_pem),
    "hs256-with-the-rsa-public-key-as-secret-without-kid": lambda k, r: hmac_forge(
        {"alg": "HS256", "typ": "JWT"}, claims(read=[r]), k["rs"].public_pem),
    "hs256-with-the-ec-public-key-as-secret": lambda k, r: hmac_forge(
        {"alg": "HS256", "typ": "JWT", "kid": "es-1"}, claims(read=[r]), k["es"].public_pem),
    "hs256-with-the-rsa-jwk-as-secret": lambda k, r: hmac_forge(
        {"alg": "HS256", "typ": "JWT", "kid": "rs-1"}, claims(read=[r]), json.dumps(k["rs"].jwk).encode()),
    "hs256-with-the-right-secret-but-an-rsa-kid": lambda k, r: mint(k["hs"], read=[r], kid="rs-1"),
    "es256-with-an-rsa-kid": lambda k, r: mint(k["es"], read=[r], kid="rs-1"),
    "an-alg-the-set-does-not-hold-rs512": lambda k, r: mint(k["rs"], alg="RS512", read=[r]),
    "an-alg-the-set-does-not-hold-ps256": lambda k, r: mint(k["rs"], alg="PS256", read=[r]),
    "wrong-key-with-a-known-kid": lambda k, r: mint(k["rogue"], read=[r]),
    "wrong-key-without-kid": lambda k, r: mint(k["rogue"], read=[r], kid=None),
    "unknown-kid": lambda k, r: mint(k["rs"], read=[r], kid="nope"),
    "expired-beyond-leeway": lambda k, r: mint(k["es"], read=[r], exp_in=-30),
    "not-yet-valid": lambda k, r: mint(k["es"], read=[r], nbf=int(time.time()) + 60),
    "no-exp": lambda k, r: mint(k["ed"], read=[r], exp_in=None),
    "altered-payload": lambda k, r: swap_payload(mint(k["ed"], read=["elsewhere"]), admin_claims(r)),
    "altered-payload-hs256": lambda k, r: swap_payload(mint(k["hs"], read=["elsewhere"]), claims(read=[r])),
    "signature-stripped": lambda k, r: mint(k["rs"], read=[r]).rsplit(".", 1)[0] + ".",
    "two-segments": lambda k, r: mint(k["rs"], read=[r]).rsplit(".", 1)[0],
    "not-a-jwt": lambda k, r: "hello",
    "100-kb-of-garbage": lambda k, r: garbage(100_000),
}


@pytest.mark.parametrize("case", sorted(BAD_TOKENS))
def test_a_bad_token_is_refused_and_leaves_the_rights_as_they_were(fresh_daemon, keys, ns, case):
    daemon = fresh_daemon
    name, other = f"{ns}.c", f"{ns}.other"
    daemon.seed(name)
    daemon.seed(other)
    bad = BAD_TOKENS[case](keys, name)
    with daemon.connect("unix", mint(keys["ed"], sub="before", read=[other])) as connection:
        refused(connection.request({"op": "auth", "token": bad}), op="auth")
        refused(connection.request({"op": "get", "collection": name}), "read", name)
        accepted(connection.request({"op": "get", "collection": other}), "get")
        accepted(connection.request({"op": "ping"}), "ping")
    assert daemon.alive()
    with daemon.owner() as owner:
        accepted(owner.request({"op": "ping"}))


@pytest.mark.parametrize("case", sorted(BAD_TOKENS))
def test_a_bad_token_over_http_is_401(fresh_daemon, keys, ns, case):
    daemon = fresh_daemon
    name = f"{ns}.c"
    daemon.seed(name)
    bad = BAD_TOKENS[case](keys, name)
    status, _, answer = daemon.call("GET", f"/v1/collections/{name}", token=bad)
    if len(bad) > 16000 and status == 431:
        return  # a header too long for HTTP at all: refused before any token is looked at
    assert status == 401, (status, answer)
    assert answer["ok"] is False and answer["error"]["code"] == "unauthorized", answer
    if len(bad) < 4000:  # (a URL of 100 KB is another matter)
        status, _, answer = daemon.call("GET", f"/v1/collections/{name}", query_token=bad)
        assert status == 401, (status, answer)
    assert daemon.alive()


# MARK: - time claims and leeway


def test_time_claims_within_the_default_leeway_of_5_s_are_accepted(daemon, keys, ns):
    name = f"{ns}.c"
    daemon.seed(name)
    now = int(time.time())
    for token in (mint(keys["rs"], read=[name], exp_in=-2),
                  mint(keys["rs"], read=[name], nbf=now + 2),
                  mint(keys["rs"], read=[name], iat=now + 2)):
        with daemon.connect("unix", token) as connection:
            accepted(connection.request({"op": "get", "collection": name}), "get")


def test_aud_and_iss_are_not_checked_when_not_configured(daemon, keys, ns):
    name = f"{ns}.c"
    daemon.seed(name)
    token = mint(keys["es"], read=[name], aud="somebody-else", iss="https://somewhere.example")
    with daemon.connect("unix", token) as connection:
        accepted(connection.request({"op": "get", "collection": name}), "get")


@pytest.fixture
def audience_daemon(keys, jwks_dir):
    path = write_jwks(jwks_dir / "audience.json", [keys["rs"], keys["ed"]])
    with AccessDaemon(["--auth-keys", str(path), "--auth-audience", "diffcast-test",
                       "--auth-issuer", "https://issuer.test"], tcp=False) as running:
        yield running


@pytest.mark.parametrize("aud,iss,ok", [
    ("diffcast-test", "https://issuer.test", True),
    (["other", "diffcast-test"], "https://issuer.test", True),
    ("other", "https://issuer.test", False),
    (["other", "more"], "https://issuer.test", False),
    ("diffcast-test", "https://evil.test", False),
    ("Diffcast-Test", "https://issuer.test", False),
], ids=["both-right", "aud-list-holding-it", "wrong-aud", "aud-list-without-it", "wrong-iss", "aud-case"])
def test_aud_and_iss_are_checked_when_configured(audience_daemon, keys, ns, aud, iss, ok):
    name = f"{ns}.c"
    audience_daemon.seed(name)
    token = mint(keys["ed"], read=[name], aud=aud, iss=iss)
    with audience_daemon.connect("unix") as connection:
        answer = connection.request({"op": "auth", "token": token})
        if ok:
            accepted(answer, "auth")
        else:
            refused(answer, op="auth")
    status, _, answer = audience_daemon.call("GET", f"/v1/collections/{name}", token=token)
    assert status == (200 if ok else 401), (status, answer)


# MARK: - refused attempts


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_refused_auth_keeps_the_previous_rights_and_subscriptions(fresh_daemon, keys, ns, transport):
    daemon = fresh_daemon
    name = f"{ns}.c"
    daemon.seed(name)
    with daemon.connect(transport, mint(keys["hs"], sub="keeper", read=[name])) as connection:
        accepted(connection.request({"op": "subscribe", "collection": name}))
        assert connection.event()["event"] == "snapshot"
        refused(connection.request({"op": "auth", "token": mint(keys["rogue"], read=[name])}), op="auth")
        daemon.write(name, {"op": "append_items", "items": ["d"]})
        event = connection.event()
        assert event["event"] == "changeset" and event["version"] == 2, event
        accepted(connection.request({"op": "get", "collection": name}), "get")


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_two_refused_auths_keep_the_connection_open(fresh_daemon, keys, transport):
    daemon = fresh_daemon
    with daemon.connect(transport) as connection:
        for _ in range(2):
            refused(connection.request({"op": "auth", "token": mint(keys["rogue"])}), op="auth")
        accepted(connection.request({"op": "ping"}), "ping")
        accepted(connection.request({"op": "auth", "token": mint(keys["rs"])}), "auth")


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_the_third_refused_auth_closes_the_connection(fresh_daemon, keys, transport):
    daemon = fresh_daemon
    with daemon.connect(transport) as connection:
        for _ in range(2):
            refused(connection.request({"op": "auth", "token": "not.a.token"}), op="auth")
        connection.send({"op": "auth", "token": mint(keys["rs"], exp_in=-60)})
        try:
            arrived = connection.wait_closed(timeout=3)
        except TimeoutError:
            pytest.fail("the connection is still open after 3 refused auths")
        for message in arrived:
            refused(message, op="auth")
    assert daemon.alive()


# MARK: - algorithms


@pytest.mark.parametrize("with_kid", [True, False], ids=["kid", "no-kid"])
@pytest.mark.parametrize("key", ["hs", "rs", "rs2", "es", "ed"])
def test_every_supported_algorithm_is_accepted(daemon, keys, ns, key, with_kid):
    name = f"{ns}.c"
    daemon.seed(name)
    token = mint(keys[key], sub=f"holder-{key}", read=[name], kid=keys[key].kid if with_kid else None)
    with daemon.connect("unix", token) as connection:
        accepted(connection.request({"op": "get", "collection": name}), "get")
        refused(connection.request({"op": "get", "collection": f"{ns}.other"}), "read", f"{ns}.other")
    status, _, answer = daemon.call("GET", f"/v1/collections/{name}", token=token)
    assert status == 200, (status, answer)


# MARK: - HTTP statuses


def test_http_answers_401_without_a_token(daemon, ns):
    name = f"{ns}.c"
    daemon.seed(name)
    status, headers, answer = daemon.call("GET", f"/v1/collections/{name}")
    assert status == 401, (status, answer)
    assert answer["ok"] is False and answer["error"]["code"] == "unauthorized", answer
    status, _, answer = daemon.call("POST", f"/v1/collections/{name}", {"op": "append_items", "items": ["x"]})
    assert status == 401, (status, answer)
    with daemon.events(name) as stream:
        assert stream.status == 401, stream.body
    assert daemon.state(name)[0] == 1


@pytest.mark.parametrize("how", ["header", "query"])
def test_http_answers_401_with_an_invalid_token(fresh_daemon, keys, ns, how):
    daemon = fresh_daemon
    name = f"{ns}.c"
    daemon.seed(name)
    for bad in (mint(keys["rs"], read=[name], write=[name], exp_in=-60), mint(keys["rogue"], read=[name]),
                "garbage", mint(keys["ed"], read=[name], kid="unknown")):
        options = {"token": bad} if how == "header" else {"query_token": bad}
        status, _, answer = daemon.call("GET", f"/v1/collections/{name}", **options)
        assert status == 401, (bad, status, answer)
        status, _, answer = daemon.call("POST", f"/v1/collections/{name}", {"op": "delete_all"}, **options)
        assert status == 401, (bad, status, answer)
        with daemon.events(name, **options) as stream:
            assert stream.status == 401, (bad, stream.body)
    assert daemon.state(name)[0] == 1


@pytest.mark.parametrize("how", ["header", "query"])
def test_http_answers_403_with_a_valid_token_that_lacks_the_right(daemon, keys, ns, how):
    name = f"{ns}.c"
    daemon.seed(name)
    token = mint(keys["es"], sub="bob", read=[f"{ns}.mine"], write=[f"{ns}.mine"])
    options = {"token": token} if how == "header" else {"query_token": token}
    status, _, answer = daemon.call("GET", f"/v1/collections/{name}", **options)
    assert status == 403, (status, answer)
    refused(answer, "read", name)
    status, _, answer = daemon.call("POST", f"/v1/collections/{name}", {"op": "delete_all"}, **options)
    assert status == 403, (status, answer)
    refused(answer, "write", name)
    with daemon.events(name, **options) as stream:
        assert stream.status == 403, stream.body
    # A reader that may not write: 403 too.
    reader = mint(keys["es"], sub="bob", read=[name])
    status, _, answer = daemon.call("POST", f"/v1/collections/{name}", {"op": "append_items", "items": ["x"]},
                                    token=reader)
    assert status == 403, (status, answer)
    refused(answer, "write", name)
    assert daemon.state(name)[0] == 1


def test_an_address_with_many_refused_tokens_is_refused_unverified_for_a_while(fresh_daemon, keys, ns):
    # Issue 41: refused tokens are slowed per peer address (5 in 10 s: refused without verifying
    # for 10 s), whatever the connection; other addresses are not affected. Over HTTP the
    # refusal is a 401, and a request that presents no token is not slowed.
    daemon = fresh_daemon
    name = f"{ns}.c"
    daemon.seed(name)
    for _ in range(5):
        with daemon.connect("tcp") as connection:
            refused(connection.request({"op": "auth", "token": mint(keys["rogue"], read=[name])}), op="auth")
    with daemon.connect("tcp") as connection:
        answer = connection.request({"op": "auth", "token": mint(keys["rs"], read=[name])})
        refused(answer, op="auth")
        assert "too many refused tokens from 127.0.0.1" in answer["error"]["message"], answer
    status, _, answer = daemon.call("GET", f"/v1/collections/{name}", token=mint(keys["rs"], read=[name]))
    assert status == 401 and "too many refused tokens" in answer["error"]["message"], (status, answer)
    # The Unix socket's peers are another address (their uid).
    with daemon.connect("unix") as connection:
        accepted(connection.request({"op": "auth", "token": mint(keys["rs"], read=[name])}), "auth")

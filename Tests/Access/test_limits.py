"""Limits per holder (SPEC "Scoped access": max_connections_per_subject)."""

import re
import time

import pytest

from access_support import TRANSPORTS, AccessDaemon, accepted, mint, write_jwks


@pytest.fixture(scope="module")
def limited_daemon(keys, jwks_dir):
    path = write_jwks(jwks_dir / "limited.json", [keys["rs"], keys["ed"]])
    with AccessDaemon(["--auth-keys", str(path), "--max-connections-per-subject", "2"]) as running:
        yield running


def over_the_limit(answer, sub):
    assert answer.get("ok") is False and answer.get("op") == "auth", answer
    assert answer["error"]["code"] == "limit_exceeded", answer
    message = answer["error"]["message"]
    assert re.search(r"\b2\b", message), f"the message does not name the limit: {answer}"
    assert sub in message, f"the message does not name the sub: {answer}"


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_the_third_connection_of_one_subject_is_answered_limit_exceeded(limited_daemon, keys, ns, transport):
    daemon = limited_daemon
    sub = f"carol-{ns}"
    first = daemon.connect(transport, mint(keys["rs"], sub=sub))
    second = daemon.connect(transport, mint(keys["ed"], sub=sub))
    try:
        with daemon.connect(transport) as third:
            over_the_limit(third.request({"op": "auth", "token": mint(keys["rs"], sub=sub)}), sub)
            # Another holder is not held back, and a refresh on a counted connection is no new one.
            accepted(third.request({"op": "auth", "token": mint(keys["rs"], sub=f"dave-{ns}")}), "auth")
            accepted(first.request({"op": "auth", "token": mint(keys["ed"], sub=sub)}), "auth")
            accepted(first.request({"op": "ping"}))
        first.close()

        # Once one has closed, the next auth of that holder works (closing may take a moment).
        deadline = time.monotonic() + 3
        while True:
            with daemon.connect(transport) as again:
                answer = again.request({"op": "auth", "token": mint(keys["rs"], sub=sub)})
                if answer.get("ok"):
                    break
                over_the_limit(answer, sub)
            assert time.monotonic() < deadline, "auth still refused 3 s after a connection of the holder closed"
            time.sleep(0.05)
    finally:
        first.close()
        second.close()


def test_connections_of_one_subject_count_across_transports(limited_daemon, keys, ns):
    daemon = limited_daemon
    sub = f"erin-{ns}"
    with daemon.connect("unix", mint(keys["rs"], sub=sub)), daemon.connect("ws", mint(keys["ed"], sub=sub)):
        with daemon.connect("tcp") as third:
            over_the_limit(third.request({"op": "auth", "token": mint(keys["rs"], sub=sub)}), sub)

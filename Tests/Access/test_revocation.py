"""Rights that end while a subscription lives (SPEC "Scoped access": Expiry, Presenting a token,
Keys; "Events": revoked): a token that expires, a refresh that narrows, a key removed by SIGHUP."""

import signal
import time
import urllib.parse

import pytest

from access_support import (TRANSPORTS, AccessDaemon, accepted, es256_key, mint, refused, wait_until,
                            write_jwks)


def assert_revoked(event, name):
    assert event.get("event", "revoked") == "revoked", event
    assert event["collection"] == name, event
    assert event["error"]["code"] == "unauthorized", event
    assert isinstance(event["error"]["message"], str) and event["error"]["message"], event


def next_event_of(connection, name, timeout, skipped=None):
    """The next event of collection `name`; events of others are skipped (and put in `skipped`)."""
    deadline = time.monotonic() + timeout
    while True:
        event = connection.event(max(0.01, deadline - time.monotonic()))
        if event.get("collection") == name:
            return event
        if skipped is not None:
            skipped.append(event)


@pytest.fixture(scope="module")
def expiry_daemon(keys, jwks_dir):
    path = write_jwks(jwks_dir / "expiry.json", [keys["rs"], keys["ed"]])
    with AccessDaemon(["--auth-keys", str(path), "--auth-leeway-s", "0",
                       "--auth-anonymous", '{"read":["public.>"]}']) as running:
        yield running


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_an_expiring_token_revokes_its_subscriptions_and_a_fresh_auth_resumes_with_one_changeset(
        expiry_daemon, keys, ns, transport):
    daemon = expiry_daemon
    name, public = f"{ns}.c", f"public.{ns}.board"
    daemon.seed(name)
    daemon.seed(public)
    expires = int(time.time()) + 3
    with daemon.connect(transport, mint(keys["ed"], sub="short", read=[name], exp=expires)) as connection:
        subscribed = accepted(connection.request({"op": "subscribe", "collection": name}), "subscribe")
        assert subscribed["version"] == 1
        snapshot = connection.event()
        assert snapshot["event"] == "snapshot" and snapshot["version"] == 1
        epoch = snapshot["epoch"]
        accepted(connection.request({"op": "subscribe", "collection": public}), "subscribe")
        assert connection.event()["collection"] == public
        daemon.write(name, {"op": "append_items", "items": ["d"]})
        assert next_event_of(connection, name, 2)["version"] == 2

        event = next_event_of(connection, name, expires - time.time() + 3)
        arrived = time.time()
        assert event["event"] == "revoked", event
        assert_revoked(event, name)
        assert arrived >= expires - 1, f"revoked {expires - arrived:.2f} s before exp"
        assert arrived <= expires + 1.5, f"revoked {arrived - expires:.2f} s after exp (SPEC: within one second)"

        # Nothing follows the revoked event; the anonymous subscription goes on.
        daemon.write(name, {"op": "append_items", "items": ["e"]})
        daemon.write(name, {"op": "append_items", "items": ["f"]})
        daemon.write(public, {"op": "append_items", "items": ["p"]})
        skipped = []
        after = next_event_of(connection, public, 2, skipped)
        assert after["event"] == "changeset" and after["version"] == 2, after
        stray = [message for message in skipped + connection.quiet(0.5) if message.get("collection") == name]
        assert stray == [], f"events after revoked: {stray}"

        # Requests the rights no longer allow are refused; the connection stays open.
        refused(connection.request({"op": "get", "collection": name}), "read", name)
        accepted(connection.request({"op": "ping"}), "ping")
        accepted(connection.request({"op": "get", "collection": public}), "get")

        # A fresh token, and subscribe with since/epoch: exactly one changeset, 2 -> 4.
        accepted(connection.request({"op": "auth", "token": mint(keys["rs"], sub="short", read=[name])}), "auth")
        answer = accepted(connection.request({"op": "subscribe", "collection": name, "since": 2, "epoch": epoch}))
        assert answer["version"] == 4, answer
        events = [message for message in connection.quiet(0.4) if message.get("collection") == name]
        assert len(events) == 1, events
        assert events[0]["event"] == "changeset" and events[0]["from"] == 2 and events[0]["version"] == 4, events


def test_an_expiring_token_ends_an_event_stream_with_revoked_and_it_resumes_with_one_changeset(
        expiry_daemon, keys, ns):
    daemon = expiry_daemon
    name = f"{ns}.c"
    daemon.seed(name)
    expires = int(time.time()) + 3
    with daemon.events(name, query_token=mint(keys["rs"], sub="page", read=[name], exp=expires)) as stream:
        assert stream.status == 200, stream.body
        identifier, kind, snapshot = stream.next()
        assert kind == "snapshot" and snapshot["version"] == 1
        daemon.write(name, {"op": "append_items", "items": ["d"]})
        identifier, kind, changeset = stream.next()
        assert kind == "changeset" and changeset["version"] == 2
        last_id = identifier
        _, kind, data = stream.next(expires - time.time() + 3)
        arrived = time.time()
        assert kind == "revoked", (kind, data)
        assert_revoked(data, name)
        assert expires - 1 <= arrived <= expires + 1.5, f"revoked {arrived - expires:+.2f} s from exp"
        daemon.write(name, {"op": "append_items", "items": ["e"]})
        daemon.write(name, {"op": "append_items", "items": ["f"]})
        try:
            after = stream.wait_end(timeout=2)
        except TimeoutError:
            pytest.fail("the event stream did not end after revoked")
        assert after == [], f"events after revoked: {after}"

    fresh = mint(keys["ed"], sub="page", read=[name])
    with daemon.events(name, query_token=fresh, headers=[f"Last-Event-ID: {last_id}"]) as resumed:
        assert resumed.status == 200, resumed.body
        _, kind, catch_up = resumed.next()
        assert kind == "changeset" and catch_up["from"] == 2 and catch_up["version"] == 4, (kind, catch_up)
        assert resumed.quiet(0.3) == []
    # The same with ?since=&epoch= instead of Last-Event-ID.
    query = f"since=2&epoch={urllib.parse.quote(snapshot['epoch'], safe='')}"
    with daemon.events(name, query_token=fresh, query=query) as resumed:
        assert resumed.status == 200, resumed.body
        _, kind, catch_up = resumed.next()
        assert kind == "changeset" and catch_up["from"] == 2 and catch_up["version"] == 4, (kind, catch_up)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_refresh_that_narrows_revokes_what_it_no_longer_covers(daemon, keys, ns, transport):
    a, b = f"{ns}.a", f"{ns}.b"
    daemon.seed(a)
    daemon.seed(b)
    with daemon.connect(transport, mint(keys["es"], sub="narrow", read=[a, b])) as connection:
        for name in (a, b):
            accepted(connection.request({"op": "subscribe", "collection": name}))
            assert connection.event()["event"] == "snapshot"
        # Widening revokes nothing.
        accepted(connection.request({"op": "auth", "token": mint(keys["es"], sub="narrow", read=[a, b, f"{ns}.z"])}))
        assert connection.quiet(0.3) == []
        started = time.monotonic()
        accepted(connection.request({"op": "auth", "token": mint(keys["rs"], sub="narrow", read=[a])}), "auth")
        event = connection.event(timeout=3)
        assert time.monotonic() - started <= 1.5, "revoked came later than one second after the refresh"
        assert event["event"] == "revoked", event
        assert_revoked(event, b)
        daemon.write(b, {"op": "append_items", "items": ["x"]})
        daemon.write(a, {"op": "append_items", "items": ["y"]})
        event = connection.event()
        assert event["event"] == "changeset" and event["collection"] == a and event["version"] == 2, event
        assert connection.quiet(0.4) == [], "events after revoked (or a second revoked)"
        refused(connection.request({"op": "get", "collection": b}), "read", b)
        accepted(connection.request({"op": "get", "collection": a}))


@pytest.fixture
def reloading_daemon(keys, tmp_path):
    path = write_jwks(tmp_path / "keys.json", [keys["rs"], keys["ed"]])
    with AccessDaemon(["--auth-keys", str(path)]) as running:
        running.jwks = path
        yield running


def test_a_key_removed_by_sighup_revokes_its_holders_at_once(reloading_daemon, keys, ns):
    daemon = reloading_daemon
    name = f"{ns}.c"
    daemon.seed(name)
    doomed = mint(keys["rs"], sub="doomed", read=[name])
    kept = mint(keys["ed"], sub="kept", read=[name])
    with daemon.connect("unix", doomed) as gone, daemon.connect("tcp", kept) as staying, \
            daemon.connect("ws", doomed) as gone_too, daemon.events(name, query_token=doomed) as stream:
        for connection in (gone, staying, gone_too):
            accepted(connection.request({"op": "subscribe", "collection": name}))
            assert connection.event()["event"] == "snapshot"
        assert stream.status == 200 and stream.next()[1] == "snapshot"

        write_jwks(daemon.jwks, [keys["ed"]])
        daemon.signal(signal.SIGHUP)
        started = time.monotonic()
        for connection in (gone, gone_too):
            event = connection.event(timeout=3)
            assert event["event"] == "revoked", event
            assert_revoked(event, name)
        _, kind, data = stream.next(timeout=3)
        assert kind == "revoked", (kind, data)
        assert time.monotonic() - started <= 2.0, "revoked more than 2 s after SIGHUP"
        assert stream.wait_end(timeout=2) == []

        daemon.write(name, {"op": "append_items", "items": ["d"]})
        assert staying.event()["version"] == 2
        assert gone.quiet(0.3) == [] and gone_too.quiet(0.1) == []
        refused(gone.request({"op": "get", "collection": name}), "read", name)
        accepted(staying.request({"op": "get", "collection": name}))

    with daemon.connect("unix") as connection:
        refused(connection.request({"op": "auth", "token": mint(keys["rs"], sub="doomed", read=[name])}), op="auth")
        refused(connection.request({"op": "auth", "token": mint(keys["rs"], sub="doomed", read=[name], kid=None)}),
                op="auth")
    assert daemon.call("GET", f"/v1/collections/{name}", token=doomed)[0] == 401
    assert daemon.alive()


def test_a_key_added_by_sighup_works(reloading_daemon, keys, ns):
    daemon = reloading_daemon
    name = f"{ns}.c"
    daemon.seed(name)
    newcomer = es256_key("es-new")
    token = mint(newcomer, sub="new", read=[name])
    assert daemon.call("GET", f"/v1/collections/{name}", token=token)[0] == 401
    write_jwks(daemon.jwks, [keys["rs"], keys["ed"], newcomer])
    daemon.signal(signal.SIGHUP)
    wait_until(lambda: daemon.call("GET", f"/v1/collections/{name}", token=token)[0] == 200, timeout=3,
               what="the added key to be taken")
    with daemon.connect("tcp", token) as connection:
        accepted(connection.request({"op": "get", "collection": name}))
    # The keys that stayed still work.
    with daemon.connect("unix", mint(keys["rs"], read=[name])) as connection:
        accepted(connection.request({"op": "get", "collection": name}))

import json
import os
import pathlib
import random
import re
import socket
import subprocess
import sys
import time

import pytest
import websocket  # websocket-client (PyPI)

from conftest import REPOSITORY, HTTPDaemon

from diffcast.mirror import Mirror

CHECKER = pathlib.Path(os.environ.get("CHECKER", REPOSITORY.parent / "shared/conformance/check.py"))


class EventStream:
    """A Server-Sent Events reader on a raw socket: (id, event, data) per event."""

    def __init__(self, daemon, path, headers=()):
        self.socket = socket.create_connection(("127.0.0.1", daemon.port), timeout=10)
        head = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
        head += "".join(f"{header}\r\n" for header in headers) + "\r\n"
        self.socket.sendall(head.encode())
        self.reader = self.socket.makefile("rb")
        self.status = int(self.reader.readline().split()[1])
        self.headers = {}
        while (line := self.reader.readline().decode().rstrip("\r\n")):
            name, value = line.split(":", 1)
            self.headers[name.lower()] = value.strip()

    def next(self):
        fields = {}
        while True:
            line = self.reader.readline().decode()
            if line == "":
                raise EOFError("the stream ended")
            line = line.rstrip("\n")
            if line == "":
                if "data" in fields:
                    return fields.get("id"), fields.get("event"), json.loads(fields["data"])
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(": ")
            fields[name] = value

    def close(self):
        self.socket.close()


def write(daemon, line):
    """One request line through POST /v1/requests; its answer."""
    status, _, answer = daemon.call("POST", "/v1/requests", line.encode())
    assert status == 200 and answer["ok"], answer
    return answer


def test_the_api_answers_as_the_socket_does_with_fitting_statuses(http_daemon):
    status, headers, answer = http_daemon.call("GET", "/v1/collections")
    assert (status, answer) == (200, {"ok": True, "op": "list", "collections": []})
    assert headers["Content-Type"] == "application/json"
    status, _, answer = http_daemon.call("POST", "/v1/collections/feed", {"op": "apply", "sections": [{"id": "s", "items": ["a"]}]})
    assert (status, answer) == (200, {"ok": True, "op": "apply", "version": 1})
    status, _, answer = http_daemon.call("GET", "/v1/collections/feed")
    with http_daemon.client() as client:
        assert answer == client.get("feed") | {"op": "get"}
    assert status == 200
    for method, path, body, expected, code in [
        ("GET", "/v1/collections/ghost", None, 404, "unknown_collection"),
        ("POST", "/v1/collections/feed", {"op": "append_items", "items": ["a"]}, 409, "duplicate_identifier"),
        ("POST", "/v1/collections/feed", {"op": "update_items", "items": [{"id": "a", "dta": 1}]}, 400, "invalid_argument"),
        ("POST", "/v1/collections/feed", b"{not json", 400, "parse_error"),
        ("POST", "/v1/collections/feed", {"op": "get", "collection": "other"}, 400, "invalid_argument"),
        ("GET", "/v1/nowhere", None, 404, "not_found"),
        ("DELETE", "/v1/collections/feed", None, 405, "invalid_argument"),
        ("GET", "/v1/ws", None, 426, "invalid_argument"),
        ("POST", "/v1/collections/feed", {"op": "subscribe"}, 400, "invalid_argument"),
    ]:
        status, _, answer = http_daemon.call(method, path, body)
        assert status == expected, (method, path, answer)
        assert answer["error"]["code"] == code, (method, path, answer)
    # A refused write changed nothing.
    assert http_daemon.call("GET", "/v1/collections/feed")[2]["version"] == 1


def test_a_batch_of_lines_is_answered_line_by_line_in_order(http_daemon):
    body = b'append_sections b {"sections":[{"id":"s"}]}\nappend_items b {"items":["x"]}\nappend_items b {"items":["x"]}\nping\n'
    status, headers, text = http_daemon.call("POST", "/v1/requests", body)
    answers = [json.loads(line) for line in text.splitlines()]
    assert status == 200 and headers["Transfer-Encoding"] == "chunked"
    # The two writes may be applied as one version (coalesced): each says which.
    assert answers[0]["version"] == 1 and answers[1]["version"] in (1, 2)
    assert answers[2]["error"]["code"] == "duplicate_identifier" and answers[3] == {"ok": True, "op": "ping"}


def test_a_subscribe_in_a_plain_request_is_refused_for_its_transport_and_names_the_ones_that_carry_events(
        http_daemon):
    body = b'ping\n{"op":"subscribe","collection":"feed"}\nping\n'
    status, _, text = http_daemon.call("POST", "/v1/requests", body)
    answers = [json.loads(line) for line in text.splitlines()]
    assert status == 200 and answers[0] == answers[2] == {"ok": True, "op": "ping"}
    assert answers[1]["error"]["code"] == "invalid_argument", answers
    assert "/v1/collections/NAME/events" in answers[1]["error"]["message"] and "/v1/ws" in answers[1]["error"]["message"]
    # Nothing was subscribed: the collection was not created by it.
    assert http_daemon.call("GET", "/v1/collections")[2]["collections"] == []


def test_server_sent_events_resume_with_last_event_id_and_one_changeset(http_daemon):
    write(http_daemon, 'apply feed {"sections":[{"id":"s","items":["a"]}]}')
    stream = EventStream(http_daemon, "/v1/collections/feed/events")
    assert stream.status == 200 and stream.headers["content-type"] == "text/event-stream"
    identifier, kind, snapshot = stream.next()
    assert kind == "snapshot" and identifier == f"{snapshot['epoch']}:1"
    mirror = Mirror()
    mirror.feed(snapshot)
    write(http_daemon, 'append_items feed {"items":["b"]}')
    identifier, kind, changeset = stream.next()
    assert (kind, identifier) == ("changeset", f"{snapshot['epoch']}:2")
    mirror.feed(changeset)
    stream.close()
    # Gone for two versions; EventSource comes back with the id of the last event it saw.
    write(http_daemon, 'append_items feed {"items":["c"]}')
    write(http_daemon, 'update_items feed {"items":[{"id":"a","data":{"n":1}}]}')
    resumed = EventStream(http_daemon, "/v1/collections/feed/events", [f"Last-Event-ID: {identifier}"])
    identifier, kind, catch_up = resumed.next()
    assert kind == "changeset" and catch_up["from"] == 2 and catch_up["version"] == 4
    mirror.feed(catch_up)
    assert mirror.digest() == http_daemon.call("GET", "/v1/collections/feed")[2]["digest"]
    write(http_daemon, "drop feed")
    assert resumed.next()[1] == "dropped"
    resumed.close()


def test_an_idle_event_stream_gets_heartbeats_and_its_events_between_them():
    # Every 200 ms a comment line, event or not, so that a proxy does not close the stream as idle;
    # a comment is a line of its own between events, and a reader that skips comments (as
    # EventSource does) sees the events unchanged.
    with HTTPDaemon(["--stream-heartbeat-ms", "200"]) as daemon:
        write(daemon, 'apply beat {"sections":[{"id":"s"}]}')
        stream = EventStream(daemon, "/v1/collections/beat/events")
        assert stream.next()[1] == "snapshot"
        stream.socket.settimeout(10)
        heartbeats = 0
        while heartbeats < 3:
            line = stream.reader.readline()
            assert line != b"", "the stream ended"
            if line == b": heartbeat\n":
                assert stream.reader.readline() == b"\n"
                heartbeats += 1
            else:
                assert line == b"\n", line
        write(daemon, 'append_items beat {"items":["a"]}')
        _, kind, event = stream.next()
        assert (kind, event["version"], event["items"]["inserted"]) == ("changeset", 2, [{"at": [0, 0], "id": "a"}])
        stream.close()


def test_a_compact_event_stream_sends_changesets_without_their_envelope_and_they_verify(http_daemon):
    # ?compact=1: a changeset comes as the default event (no `event:` line) without the
    # collection, epoch and `from` the stream established; its id, version, changes and digest
    # are those of the full stream beside it, and a mirror that holds the version before applies
    # it to the daemon's state. Snapshots and `dropped` come in full.
    write(http_daemon, 'apply lean {"sections":[{"id":"s","items":["a"]}]}')
    full = EventStream(http_daemon, "/v1/collections/lean/events")
    compact = EventStream(http_daemon, "/v1/collections/lean/events?compact=1")
    (full_id, full_kind, full_snapshot), (compact_id, compact_kind, compact_snapshot) = full.next(), compact.next()
    assert (compact_id, compact_kind, compact_snapshot) == (full_id, full_kind, full_snapshot)
    assert compact_kind == "snapshot" and "epoch" in compact_snapshot and "collection" in compact_snapshot
    mirror = Mirror()
    mirror.feed(compact_snapshot)
    writes = [
        'append_items lean {"items":[{"id":"b","data":{"n":1}}]}',
        'update_items lean {"items":[{"id":"a","data":"new"}]}',
        'move_item lean {"item":"a","after":"b"}',
        'append_sections lean {"sections":[{"id":"t","items":["c"]}]}',
        'delete_items lean {"items":["b"]}',
    ]
    for line in writes:
        write(http_daemon, line)
        full_id, full_kind, full_event = full.next()
        compact_id, compact_kind, compact_event = compact.next()
        assert (full_kind, compact_kind) == ("changeset", None)
        assert compact_id == full_id == f"{full_snapshot['epoch']}:{full_event['version']}"
        assert compact_event == {key: value for key, value in full_event.items() if key not in ("collection", "epoch", "from")}
        assert list(compact_event) == [key for key in full_event if key not in ("collection", "epoch", "from")]
        mirror.feed(compact_event)
        assert mirror.digest() == http_daemon.call("GET", "/v1/collections/lean")[2]["digest"]
    write(http_daemon, "drop lean")
    assert compact.next()[1:] == full.next()[1:] == ("dropped", {"event": "dropped", "collection": "lean"})
    full.close()
    compact.close()
    status, _, answer = http_daemon.call("GET", "/v1/collections/lean/events?compact=yes")
    assert status == 400 and "compact is 1" in answer["error"]["message"]


def test_a_compact_websocket_keeps_the_collection_of_each_changeset(http_daemon):
    # A WebSocket carries several subscriptions: its compact changesets keep `collection` and
    # leave out the epoch and `from`; answers and snapshots are as on a full one.
    plain = websocket.create_connection(f"ws://127.0.0.1:{http_daemon.port}/v1/ws", timeout=10)
    lean = websocket.create_connection(f"ws://127.0.0.1:{http_daemon.port}/v1/ws?compact=1", timeout=10)
    mirrors = {}
    for name in ("one", "two"):
        write(http_daemon, f'apply {name} {{"sections":[{{"id":"s"}}]}}')
        for connection in (plain, lean):
            connection.send(f"subscribe {name}")
        full_snapshot, compact_snapshot = (
            [json.loads(connection.recv()) for _ in range(2)] for connection in (plain, lean))
        assert full_snapshot == compact_snapshot and compact_snapshot[0]["event"] == "snapshot"
        mirrors[name] = Mirror()
        mirrors[name].feed(compact_snapshot[0])
    for step in range(6):
        name = ("one", "two")[step % 2]
        write(http_daemon, f'append_items {name} {{"items":["i{step}"]}}')
        full_event, compact_event = json.loads(plain.recv()), json.loads(lean.recv())
        assert full_event["from"] == full_event["version"] - 1 and full_event["collection"] == name
        assert compact_event == {key: value for key, value in full_event.items() if key not in ("epoch", "from")}
        mirrors[compact_event["collection"]].feed(compact_event)
        assert mirrors[name].digest() == http_daemon.call("GET", f"/v1/collections/{name}")[2]["digest"]
    plain.close()
    lean.close()


def test_server_sent_events_resume_from_the_query_and_start_anew_on_another_epoch(tmp_path):
    # Two versions of history: a resume from further back gets the whole state.
    with HTTPDaemon(["--history-versions", "2"]) as daemon:
        write(daemon, 'apply feed {"sections":[{"id":"s","items":["a"]}]}')
        epoch = daemon.call("GET", "/v1/collections/feed")[2]["epoch"]
        write(daemon, 'append_items feed {"items":["b"]}')
        write(daemon, 'append_items feed {"items":["c"]}')
        now = daemon.call("GET", "/v1/collections/feed")[2]
        assert now["version"] == 3

        # `since` and `epoch` in the query (no Last-Event-ID): one changeset from version 2.
        resumed = EventStream(daemon, f"/v1/collections/feed/events?since=2&epoch={epoch}")
        identifier, kind, event = resumed.next()
        assert (kind, identifier) == ("changeset", f"{epoch}:3")
        assert (event["from"], event["version"]) == (2, 3)
        assert event["items"]["inserted"] == [{"at": [0, 2], "id": "c"}]
        resumed.close()

        # Nothing to send when `since` is current: the next event is the next version.
        current = EventStream(daemon, f"/v1/collections/feed/events?since=3&epoch={epoch}")
        write(daemon, 'append_items feed {"items":["d"]}')
        identifier, kind, event = current.next()
        assert (kind, event["from"], event["version"]) == ("changeset", 3, 4)
        current.close()

        # Another epoch (the collection was dropped and made again since): a snapshot.
        stale = EventStream(daemon, "/v1/collections/feed/events?since=3&epoch=0000000000000000")
        identifier, kind, event = stale.next()
        assert kind == "snapshot" and event["version"] == 4 and event["epoch"] == epoch
        stale.close()

        # From before the history kept: a snapshot too.
        forgotten = EventStream(daemon, f"/v1/collections/feed/events?since=1&epoch={epoch}")
        identifier, kind, event = forgotten.next()
        assert kind == "snapshot" and event["version"] == 4
        assert [item if isinstance(item, str) else item["id"] for item in event["sections"][0]["items"]] == [
            "a", "b", "c", "d"]
        forgotten.close()


def test_a_cors_preflight_names_what_a_page_may_send():
    with HTTPDaemon(["--http-origins", "https://app.example"]) as daemon:
        status, headers, _ = daemon.call(
            "OPTIONS", "/v1/requests",
            headers={"Origin": "https://app.example", "Access-Control-Request-Method": "POST",
                     "Access-Control-Request-Headers": "authorization, content-type"})
        assert status == 204
        assert headers["Access-Control-Allow-Origin"] == "https://app.example"
        assert {m.strip() for m in headers["Access-Control-Allow-Methods"].split(",")} >= {"GET", "POST"}
        allowed = {h.strip().lower() for h in headers["Access-Control-Allow-Headers"].split(",")}
        assert {"authorization", "content-type", "last-event-id"} <= allowed
        # A page of another origin is not told it may.
        status, headers, _ = daemon.call(
            "OPTIONS", "/v1/requests",
            headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"})
        assert status == 403 and "Access-Control-Allow-Origin" not in headers


def test_server_sent_events_follow_a_window_from_the_query(http_daemon):
    items = [f"n{k}" for k in range(8)]
    write(http_daemon, json.dumps({"op": "apply", "collection": "news", "sections": [{"id": "s", "items": items}]}))
    stream = EventStream(http_daemon, "/v1/collections/news/events?anchor=n5&before=1&after=1", ["Last-Event-ID: x:1"])
    identifier, kind, snapshot = stream.next()
    # A window never resumes from a version: the Last-Event-ID is not taken, a snapshot comes.
    assert kind == "snapshot" and identifier == f"{snapshot['epoch']}:1"
    assert snapshot["window"] == {"offset": 4, "count": 3, "total": 8, "anchor": "n5"}
    assert [item for section in snapshot["sections"] for item in section["items"]] == ["n4", "n5", "n6"]
    write(http_daemon, 'append_items news {"items":["n8"]}')  # outside the window: no event
    write(http_daemon, 'delete_items news {"items":["n5"]}')  # the anchor passes to n6
    identifier, kind, changeset = stream.next()
    assert kind == "changeset" and changeset["from"] == 1 and changeset["version"] == 3, changeset
    assert changeset["window"] == {"offset": 4, "count": 3, "total": 8, "anchor": "n6"}
    assert changeset["items"] == {"deleted": [{"at": [0, 1], "id": "n5"}], "inserted": [{"at": [0, 2], "id": "n7"}]}
    mirror = Mirror()
    mirror.feed(snapshot)
    mirror.feed(changeset)
    status, _, view = http_daemon.call("GET", "/v1/collections/news?anchor=n6&before=1&after=1")
    assert status == 200 and view["window"] == changeset["window"] and mirror.digest() == view["digest"]
    assert http_daemon.call("GET", "/v1/collections/news?first=99999")[0] == 413
    stream.close()
    bad = EventStream(http_daemon, "/v1/collections/news/events?first=0")
    assert bad.next()[1] == "error"
    bad.close()


def test_websocket_messages_are_protocol_lines_with_read_your_writes(http_daemon):
    connection = websocket.create_connection(f"ws://127.0.0.1:{http_daemon.port}/v1/ws", timeout=10)
    connection.send("subscribe w")
    received = [json.loads(connection.recv()) for _ in range(2)]
    assert received[0]["event"] == "snapshot" and received[1]["op"] == "subscribe"
    connection.send('append_sections w {"sections":[{"id":"s","items":["a"]}]}')
    # The event that brings version 1 comes before the answer that names it.
    event, answer = json.loads(connection.recv()), json.loads(connection.recv())
    assert event["event"] == "changeset" and event["version"] == 1
    assert answer == {"ok": True, "op": "append_sections", "version": 1}
    connection.send("APPLY w {}")
    assert "did you mean 'apply'" in json.loads(connection.recv())["error"]["message"]
    connection.close()


def test_a_websocket_upgrade_after_pipelined_requests_is_refused_once_they_are_answered(http_daemon):
    write(http_daemon, 'append_sections piped {"sections":[{"id":"s"}]}')
    upgrade = (b"GET /v1/ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
    with socket.create_connection(("127.0.0.1", http_daemon.port), timeout=10) as raw:
        # Two requests and an upgrade in one write, as a pipelining client sends them.
        line = b'append_items piped {"items":["first"]}\n'
        raw.sendall(
            b"GET /v1/collections/piped HTTP/1.1\r\nHost: x\r\n\r\n"
            + f"POST /v1/requests HTTP/1.1\r\nHost: x\r\nContent-Length: {len(line)}\r\n\r\n".encode() + line
            + upgrade)
        reader = raw.makefile("rb")

        def response():
            status = int(reader.readline().split()[1])
            headers = {}
            while (line := reader.readline().decode().rstrip("\r\n")):
                name, value = line.split(":", 1)
                headers[name.lower()] = value.strip()
            if headers.get("transfer-encoding") != "chunked":
                return status, headers, reader.read(int(headers.get("content-length", "0")))
            body = b""
            while (size := int(reader.readline().strip(), 16)):
                body += reader.read(size)
                reader.readline()
            reader.readline()
            return status, headers, body

        # The requests before it are answered, in order ...
        status, _, body = response()
        assert status == 200 and json.loads(body)["version"] == 1
        status, _, body = response()
        assert status == 200 and json.loads(body)["version"] == 2
        # ... then the upgrade is refused, saying why, and the connection ends.
        status, headers, body = response()
        assert status == 400 and headers["connection"] == "close"
        assert json.loads(body)["error"]["message"] == "an event stream or a WebSocket must not follow pipelined requests"
        assert reader.read() == b""
    # On a connection of its own, the same upgrade is taken.
    with socket.create_connection(("127.0.0.1", http_daemon.port), timeout=10) as raw:
        raw.sendall(upgrade)
        head = raw.makefile("rb").readline()
        assert head.startswith(b"HTTP/1.1 101 "), head


def test_the_token_and_the_origins_are_checked():
    with HTTPDaemon(["--tcp-token", "s3cret", "--http-origins", "https://app.example"]) as daemon:
        status, headers, answer = daemon.call("GET", "/v1/collections")
        assert status == 401 and headers["WWW-Authenticate"] == "Bearer" and "tcp-token" in answer["error"]["message"]
        assert daemon.call("GET", "/v1/collections", headers={"Authorization": "Bearer wrong"})[0] == 401
        assert daemon.call("GET", "/v1/collections", headers={"Authorization": "Bearer s3cret"})[0] == 200
        assert daemon.call("GET", "/v1/collections?token=s3cret")[0] == 200
        status, headers, _ = daemon.call(
            "GET", "/v1/collections?token=s3cret", headers={"Origin": "https://app.example"})
        assert status == 200 and headers["Access-Control-Allow-Origin"] == "https://app.example"
        assert daemon.call("GET", "/v1/collections?token=s3cret", headers={"Origin": "https://evil.example"})[0] == 403
        with pytest.raises(websocket.WebSocketBadStatusException):
            websocket.create_connection(f"ws://127.0.0.1:{daemon.port}/v1/ws?token=s3cret", origin="https://evil.example")
        # A WebSocket that presents nothing has the anonymous rights (none here) until it sends `auth`.
        anonymous = websocket.create_connection(f"ws://127.0.0.1:{daemon.port}/v1/ws")
        anonymous.send("list")
        assert json.loads(anonymous.recv())["error"]["code"] == "unauthorized"
        anonymous.send('{"op":"auth","token":"s3cret"}')
        assert json.loads(anonymous.recv()) == {"ok": True, "op": "auth"}
        anonymous.send("list")
        assert json.loads(anonymous.recv())["ok"] is True
        anonymous.close()
        status, _, answer = daemon.call("GET", "/v1/collections/c/events")
        assert status == 401 and answer["error"]["code"] == "unauthorized"
        good = websocket.create_connection(f"ws://127.0.0.1:{daemon.port}/v1/ws?token=s3cret", origin="https://app.example")
        good.send("ping")
        assert json.loads(good.recv()) == {"ok": True, "op": "ping"}
        good.close()
        # The page and its script need no token.
        assert daemon.call("GET", "/")[0] == 200 and daemon.call("GET", "/v1/diffcast.js")[0] == 200


def test_bad_http_gets_a_4xx_and_a_closed_connection_never_a_crash(http_daemon):
    cases = [
        b"GARBAGE\r\n\r\n",
        b"GET / HTTP/1.1\r\n" + b"X-Long: " + b"a" * 20000 + b"\r\n\r\n",
        b"POST /v1/requests HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n",
        b"GET /v1/collections/%zz HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /v1/ws HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\r\n",
        b"\x00\xff" * 100,
    ]
    rng = random.Random(7)
    for _ in range(40):
        cases.append(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300))))
        valid = bytearray(b"POST /v1/collections/r HTTP/1.1\r\nContent-Length: 20\r\n\r\n{\"op\":\"get\"}        ")
        for _ in range(3):
            valid[rng.randrange(len(valid))] = rng.randrange(256)
        cases.append(bytes(valid))
    for raw in cases:
        with socket.create_connection(("127.0.0.1", http_daemon.port), timeout=10) as connection:
            connection.sendall(raw)
            connection.shutdown(socket.SHUT_WR)
            answer = b""
            while chunk := connection.recv(65536):
                answer += chunk
        if answer:
            status = int(answer.split(b" ", 2)[1])
            assert 200 <= status < 500, (raw[:60], answer[:200])
    assert http_daemon.process.poll() is None
    assert http_daemon.call("GET", "/v1/collections")[0] == 200


@pytest.mark.skipif(not CHECKER.exists(), reason="../shared/conformance/check.py is not there")
def test_the_contract_holds_over_websocket(tmp_path):
    # Every scenario of the checker but `slow`. Over loopback TCP the kernel holds about 4 MB
    # for a stalled WebSocket, so the daemon sees little of its 6 MB unsent and sends it every
    # event; the checker's Python mirror then digests each of them through the bridge, which a
    # loaded machine does not finish within its 60 s. The next test stalls a WebSocket past what
    # the kernel holds, and checks the daemon's side of it.
    scenarios = [name for name in re.findall(r"^    def s_(\w+)\(", CHECKER.read_text(), re.MULTILINE) if name != "slow"]
    assert len(scenarios) >= 10, scenarios
    with HTTPDaemon(["--max-unsent-bytes", "262144"]) as http_daemon:
        run_the_checker_over_websocket(http_daemon, tmp_path, scenarios)


def test_a_stalled_websocket_subscriber_holds_up_no_one_and_is_caught_up_with_one_changeset():
    # Three times what the kernel may buffer for the stalled one (tcp_wmem's maximum; 4 MB on
    # Debian), and at least 12 MB: well past that and the daemon's limit.
    with open("/proc/sys/net/ipv4/tcp_wmem") as limits:
        kernel_buffer = int(limits.read().split()[2])
    with HTTPDaemon(["--max-unsent-bytes", "262144"]) as http_daemon:
        stall_one_of_two_websockets(http_daemon, megabytes=max(12, 3 * kernel_buffer // 1_000_000))


def test_a_small_tcp_send_buffer_brings_a_stalled_subscribers_catch_up_sooner():
    # 1.6 MB: less than the kernel alone would hold for the stalled one with the buffer it sizes.
    arguments = ["--max-unsent-bytes", "262144", "--tcp-send-buffer-bytes", "65536"]
    with HTTPDaemon(arguments) as http_daemon:
        stall_one_of_two_websockets(http_daemon, megabytes=1.6)


def stall_one_of_two_websockets(http_daemon, megabytes):
    """Writes `megabytes` of appends in rounds of 200 KB while one WebSocket subscriber reads
    nothing: the other gets each version before the next round, the stalled one is caught up
    (a changeset over several versions) and its changesets chain to the last version."""
    with http_daemon.client() as writer:
        url = f"ws://127.0.0.1:{http_daemon.port}/v1/ws"
        writer.append_sections("stall", [{"id": "s"}])
        # A small receive buffer, so that less of what it does not read waits in the kernel.
        stalled = websocket.create_connection(url, timeout=30, sockopt=((socket.SOL_SOCKET, socket.SO_RCVBUF, 4096),))
        fast = websocket.create_connection(url, timeout=30)
        for connection in (stalled, fast):
            connection.send("subscribe stall")
            assert json.loads(connection.recv())["event"] == "snapshot"
            assert json.loads(connection.recv())["op"] == "subscribe"
        blob = "x" * 4000
        rounds = int(megabytes * 1_000_000 // (50 * len(blob)))
        last = 1
        for round in range(rounds):
            items = [{"id": f"r{round}.{k}", "data": blob} for k in range(50)]
            last = writer.append_items("stall", items)
            while True:
                event = json.loads(fast.recv())
                if event["version"] >= last:
                    break
        versions, spans = [], []
        while not versions or versions[-1] < last:
            event = json.loads(stalled.recv())
            assert event["event"] == "changeset", event["event"]
            assert event["from"] == (versions[-1] if versions else 1), (event["from"], versions[-1:])
            versions.append(event["version"])
            spans.append(event["version"] - event["from"])
        assert versions[-1] == last and max(spans) > 1, spans
        assert writer.stats()["catch_ups"] >= 1
        # What it was sent adds up to the collection: every item of every round, in order.
        items = [item["id"] for item in writer.get("stall")["sections"][0]["items"]]
        assert items == [f"r{round}.{k}" for round in range(rounds) for k in range(50)]
        stalled.close()
        fast.close()


def run_the_checker_over_websocket(http_daemon, tmp_path, scenarios):
    bridge_path = str(tmp_path / "bridge.sock")
    bridge = subprocess.Popen(
        [sys.executable, str(pathlib.Path(__file__).parent / "ws_bridge.py"), bridge_path,
         f"ws://127.0.0.1:{http_daemon.port}/v1/ws"])
    try:
        deadline = time.monotonic() + 10
        while not os.path.exists(bridge_path):
            assert time.monotonic() < deadline, "the bridge did not start"
            time.sleep(0.05)
        result = subprocess.run(
            [sys.executable, str(CHECKER), "--socket", bridge_path, "--contract", "3",
             *[argument for name in scenarios for argument in ("-k", name)]],
            capture_output=True, text=True, timeout=600)
        assert result.returncode == 0 and f"{len(scenarios)} passed, 0 failed" in result.stdout, result.stdout[-3000:]
    finally:
        bridge.kill()


def test_a_new_users_first_mistakes_are_named(http_daemon):
    # HEAD of the page is answered as GET would be, without the body.
    connection = socket.create_connection(("127.0.0.1", http_daemon.port), timeout=5)
    connection.sendall(b"HEAD / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    raw = b""
    while chunk := connection.recv(65536):
        raw += chunk
    connection.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") and b"Content-Length: " in head and body == b"", raw[:200]
    status, _, answer = http_daemon.call("GET", "/v1/collections/")
    assert status == 400 and "empty" in answer["error"]["message"], answer
    status, _, answer = http_daemon.call("GET", "/v1/collections/feed?frist=3")
    assert status == 400 and "'frist'" in answer["error"]["message"], answer
    status, _, answer = http_daemon.call("POST", "/v1/collections/feed", b'append_items feed {"items":["a"]}')
    assert status == 400 and answer["error"]["code"] == "parse_error", answer
    assert "/v1/requests" in answer["error"]["message"] and "byte" in answer["error"]["message"], answer


def test_an_http_address_without_a_host_is_named(tmp_path):
    binary = os.environ.get("DIFFCASTD") or str(REPOSITORY / ".build" / "debug" / "diffcastd")
    refused = subprocess.run([binary, "--socket", str(tmp_path / "d.sock"), "--http", "18085"],
                             capture_output=True, text=True, timeout=10)
    assert refused.returncode == 1 and "expected IP:PORT" in refused.stderr, refused.stderr


def test_the_python_client_says_a_directory_is_not_a_socket(tmp_path):
    from diffcast.client import CannotConnect, Client
    with pytest.raises(CannotConnect) as refused:
        Client(socket_path=str(tmp_path))
    assert "is a directory" in str(refused.value), str(refused.value)

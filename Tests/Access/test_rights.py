"""Which right permits which op (SPEC "Scoped access": read, write, drop, admin), what a refusal
looks like, and that it changes nothing; name patterns; `list`; who creates by subscribing."""

import pytest

from access_support import (TRANSPORTS, AccessDaemon, accepted, mint, refused, wait_until, write_jwks)

#: Every write op but drop, each with arguments that succeed on s1 [a, b], s2 [c].
WRITES = {
    "apply": {"sections": [{"id": "s1", "items": ["z"]}]},
    "append_sections": {"sections": [{"id": "s3"}]},
    "insert_sections": {"sections": [{"id": "s0"}], "before": "s1"},
    "delete_sections": {"sections": ["s2"]},
    "move_section": {"section": "s2", "before": "s1"},
    "reload_sections": {"sections": ["s1"]},
    "update_sections": {"sections": [{"id": "s1", "data": {"k": 1}}]},
    "append_items": {"items": ["d"]},
    "insert_items": {"items": ["d"], "before": "a"},
    "delete_items": {"items": ["a"]},
    "delete_all": {},
    "move_item": {"item": "b", "before": "a"},
    "reload_items": {"items": ["a"]},
    "reconfigure_items": {"items": ["a"]},
    "update_items": {"items": [{"id": "a", "data": 1}]},
    "batch": {"ops": [{"op": "append_items", "items": ["d"]}, {"op": "delete_items", "items": ["a"]}]},
}
ALL_TRANSPORTS = TRANSPORTS + ["http"]


def attempt(daemon, transport, token, request):
    """One request on a fresh connection (or over HTTP) as the holder of `token`:
    (HTTP status or None, the response)."""
    if transport == "http":
        name = request["collection"]
        body = {key: value for key, value in request.items() if key != "collection"}
        if request["op"] == "get":
            status, _, answer = daemon.call("GET", f"/v1/collections/{name}", token=token)
        else:
            status, _, answer = daemon.call("POST", f"/v1/collections/{name}", body, token=token)
        return status, answer
    with daemon.connect(transport, token) as connection:
        return None, connection.request(request)


# MARK: - write


@pytest.mark.parametrize("op", sorted(WRITES))
@pytest.mark.parametrize("transport", ALL_TRANSPORTS)
def test_write_permits_every_write_op(daemon, keys, ns, transport, op):
    name = f"{ns}.c"
    daemon.seed(name)
    before = daemon.state(name)
    token = mint(keys["ed"], sub="writer", read=[name], write=[name])
    status, answer = attempt(daemon, transport, token, dict(WRITES[op], op=op, collection=name))
    accepted(answer, op)
    assert status in (None, 200), (status, answer)
    if op != "reconfigure_items":  # (whether a mark alone publishes is not the point here)
        assert daemon.state(name) != before, f"{op} was answered ok but changed nothing"


@pytest.mark.parametrize("op", sorted(WRITES) + ["drop"])
@pytest.mark.parametrize("transport", ALL_TRANSPORTS)
def test_read_alone_does_not_permit_writes_and_a_refusal_changes_nothing(daemon, keys, ns, transport, op):
    name = f"{ns}.c"
    daemon.seed(name)
    before = daemon.state(name)
    token = mint(keys["rs"], sub="reader", read=[name])
    status, answer = attempt(daemon, transport, token, dict(WRITES.get(op, {}), op=op, collection=name))
    refused(answer, "drop" if op == "drop" else "write", name, op=op)
    assert status in (None, 403), (status, answer)
    assert daemon.state(name) == before


@pytest.mark.parametrize("transport", ALL_TRANSPORTS)
def test_a_refused_write_to_a_missing_collection_creates_nothing(daemon, keys, ns, transport):
    name = f"{ns}.missing"
    token = mint(keys["es"], sub="stranger", read=[name], write=[f"{ns}.other"])
    status, answer = attempt(daemon, transport, token, {"op": "append_sections", "collection": name,
                                                        "sections": [{"id": "s"}]})
    refused(answer, "write", name)
    assert status in (None, 403), (status, answer)
    assert daemon.state(name) is None
    assert name not in daemon.names()


@pytest.mark.parametrize("transport", ALL_TRANSPORTS)
def test_write_does_not_permit_drop(daemon, keys, ns, transport):
    name = f"{ns}.c"
    daemon.seed(name)
    before = daemon.state(name)
    token = mint(keys["hs"], sub="writer", read=[name], write=[name])
    status, answer = attempt(daemon, transport, token, {"op": "drop", "collection": name})
    refused(answer, "drop", name, op="drop")
    assert status in (None, 403), (status, answer)
    assert daemon.state(name) == before


@pytest.mark.parametrize("transport", ALL_TRANSPORTS)
def test_drop_permits_drop_and_no_write(daemon, keys, ns, transport):
    name = f"{ns}.c"
    daemon.seed(name)
    before = daemon.state(name)
    token = mint(keys["ed"], sub="dropper", drop=[name])
    status, answer = attempt(daemon, transport, token, {"op": "append_items", "collection": name, "items": ["d"]})
    refused(answer, "write", name)
    assert daemon.state(name) == before
    status, answer = attempt(daemon, transport, token, {"op": "drop", "collection": name})
    accepted(answer, "drop")
    assert status in (None, 200)
    assert daemon.state(name) is None


@pytest.mark.parametrize("transport", ALL_TRANSPORTS)
def test_write_patterns_match_as_read_patterns_do(daemon, keys, ns, transport):
    token = mint(keys["rs"], sub="writer", write=[f"{ns}.*"])
    status, answer = attempt(daemon, transport, token, {"op": "append_sections", "collection": f"{ns}.x",
                                                        "sections": [{"id": "s"}]})
    accepted(answer)
    status, answer = attempt(daemon, transport, token, {"op": "append_sections", "collection": f"{ns}.x.y",
                                                        "sections": [{"id": "s"}]})
    refused(answer, "write", f"{ns}.x.y")
    assert daemon.state(f"{ns}.x.y") is None


# MARK: - read


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_read_permits_get_subscribe_window_and_unsubscribe(daemon, keys, ns, transport):
    name = f"{ns}.c"
    daemon.seed(name)
    token = mint(keys["es"], sub="reader", read=[name])
    with daemon.connect(transport, token) as connection:
        answer = accepted(connection.request({"op": "get", "collection": name}), "get")
        assert answer["version"] == 1
        accepted(connection.request({"op": "subscribe", "collection": name}), "subscribe")
        snapshot = connection.event()
        assert snapshot["event"] == "snapshot" and snapshot["collection"] == name and snapshot["version"] == 1
        daemon.write(name, {"op": "append_items", "items": ["d"]})
        changeset = connection.event()
        assert changeset["event"] == "changeset" and changeset["from"] == 1 and changeset["version"] == 2
        accepted(connection.request({"op": "subscribe", "collection": name, "window": {"first": 1}}), "subscribe")
        assert connection.event()["event"] == "snapshot"
        accepted(connection.request({"op": "window", "collection": name, "window": {"last": 1}}), "window")
        accepted(connection.request({"op": "unsubscribe", "collection": name}), "unsubscribe")
        connection.quiet(0.1)
        daemon.write(name, {"op": "append_items", "items": ["e"]})
        assert connection.quiet(0.3) == [], "events after unsubscribe"


def test_read_permits_get_and_event_streams_over_http(daemon, keys, ns):
    name = f"{ns}.c"
    daemon.seed(name)
    token = mint(keys["es"], sub="reader", read=[name])
    status, _, answer = daemon.call("GET", f"/v1/collections/{name}", token=token)
    assert status == 200 and answer["ok"] and answer["version"] == 1, (status, answer)
    status, _, answer = daemon.call("GET", f"/v1/collections/{name}", query_token=token)
    assert status == 200 and answer["ok"], (status, answer)
    for stream in (daemon.events(name, token=token), daemon.events(name, query_token=token)):
        with stream:
            assert stream.status == 200, stream.body
            _, kind, snapshot = stream.next()
            assert kind == "snapshot" and snapshot["version"] == 1


READS = {
    "get": {},
    "subscribe": {},
    "window": {"window": {"first": 1}},
    "unsubscribe": {},
}


@pytest.mark.parametrize("op", sorted(READS))
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_reads_need_read_on_that_collection(daemon, keys, ns, transport, op):
    name = f"{ns}.c"
    other = f"{ns}.other"
    daemon.seed(name)
    daemon.seed(other)
    before = daemon.state(name)
    token = mint(keys["hs"], sub="nosy", read=[other], write=[other], drop=[other])
    with daemon.connect(transport, token) as connection:
        refused(connection.request(dict(READS[op], op=op, collection=name)), "read", name, op=op)
        daemon.write(name, {"op": "append_items", "items": ["d"]})
        assert connection.quiet(0.3) == [], "a refused read brought events"
    assert daemon.state(name) != before  # (the owner's write)


def test_reads_need_read_over_http_and_event_streams(daemon, keys, ns):
    name = f"{ns}.c"
    daemon.seed(name)
    token = mint(keys["hs"], sub="nosy", read=[f"{ns}.other"], write=[f"{ns}.other"])
    status, _, answer = daemon.call("GET", f"/v1/collections/{name}", token=token)
    assert status == 403, (status, answer)
    refused(answer, "read", name)
    with daemon.events(name, query_token=token) as stream:
        assert stream.status == 403, stream.body
        refused(stream.body, "read", name)


@pytest.mark.parametrize("transport", ALL_TRANSPORTS)
def test_write_and_drop_without_read_do_not_permit_get(daemon, keys, ns, transport):
    # Only read (or admin) permits get.
    name = f"{ns}.c"
    daemon.seed(name)
    token = mint(keys["rs"], sub="blind", write=[name], drop=[name])
    status, answer = attempt(daemon, transport, token, {"op": "get", "collection": name})
    refused(answer, "read", name)
    assert status in (None, 403)


@pytest.mark.parametrize("transport", ALL_TRANSPORTS)
def test_list_by_a_holder_without_read_rights_answers_without_its_collections(daemon, keys, ns, transport):
    # `list` needs no right of its own: it answers only the collections its holder may read
    # (none here), never a refusal.
    name = f"{ns}.c"
    daemon.seed(name)
    token = mint(keys["rs"], sub="blind", write=[name], drop=[name])
    if transport == "http":
        status, _, answer = daemon.call("GET", "/v1/collections", token=token)
        assert status == 200, (status, answer)
    else:
        with daemon.connect(transport, token) as connection:
            answer = connection.request({"op": "list"})
    accepted(answer, "list")
    assert answer["collections"] == [], answer


# MARK: - admin and stats


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_admin_permits_everything_stats_included(daemon, keys, ns, transport):
    name = f"{ns}.any.thing"
    token = mint(keys["rs"], sub="operator", admin=True)
    with daemon.connect(transport, token) as connection:
        accepted(connection.request({"op": "stats"}), "stats")
        accepted(connection.request({"op": "subscribe", "collection": name}), "subscribe")
        assert connection.event()["version"] == 0
        accepted(connection.request({"op": "append_sections", "collection": name, "sections": [{"id": "s"}]}))
        assert connection.event()["event"] == "changeset"
        accepted(connection.request({"op": "get", "collection": name}), "get")
        assert name in {entry["name"] for entry in connection.request({"op": "list"})["collections"]}
        accepted(connection.request({"op": "drop", "collection": name}), "drop")
        assert connection.event()["event"] == "dropped"
    assert daemon.state(name) is None


def test_admin_permits_everything_over_http(daemon, keys, ns):
    name = f"{ns}.c"
    token = mint(keys["es"], sub="operator", admin=True)
    status, answers = daemon.lines(f'stats\nappend_sections {name} {{"sections":[{{"id":"s"}}]}}\nget {name}\n',
                                   token=token)
    assert status == 200 and [answer["ok"] for answer in answers] == [True, True, True], answers
    status, _, answer = daemon.call("POST", f"/v1/collections/{name}", {"op": "drop"}, token=token)
    assert status == 200 and answer["ok"], answer
    assert daemon.state(name) is None


@pytest.mark.parametrize("transport", ALL_TRANSPORTS)
def test_stats_needs_admin(daemon, keys, ns, transport):
    token = mint(keys["ed"], sub="almighty-but-not-admin", read=[">"], write=[">"], drop=[">"])
    if transport == "http":
        status, answers = daemon.lines("stats\n", token=token)
        answer = answers[0]
    else:
        with daemon.connect(transport, token) as connection:
            answer = connection.request({"op": "stats"})
    refused(answer, op="stats")


# MARK: - patterns


PATTERNS = [
    # (pattern, name, matches), both under the test's own prefix P
    ("P.news.>", "P.news.eu", True),
    ("P.news.>", "P.news.eu.fr", True),
    ("P.news.>", "P.news", False),
    ("P.news.>", "P.newsy.eu", False),
    ("P.*.c", "P.b.c", True),
    ("P.*.c", "P.bb.c", True),
    ("P.*.c", "P.b.b.c", False),
    ("P.*.c", "P.c", False),
    ("P.*", "P.x", True),
    ("P.*", "P.x.y", False),
    ("*.x", "P.x", True),
    ("P.>", "P.x.y.z", True),
    ("P.exact", "P.exact", True),
    ("P.exact", "P.exact.more", False),
    ("P.exact", "P.exactly", False),
    ("P.exact", "P.Exact", False),
    ("P.ex*", "P.exact", False),
    ("P.e>", "P.exact", False),
    ("P.a:b-c_d", "P.a:b-c_d", True),
]


@pytest.mark.parametrize("pattern,relative,matches", PATTERNS)
def test_patterns_match_token_by_token(daemon, keys, ns, pattern, relative, matches):
    name = relative.replace("P", ns, 1)
    daemon.seed(name)
    token = mint(keys["hs"], sub="patterns", read=[pattern.replace("P", ns, 1)])
    with daemon.connect("unix", token) as connection:
        answer = connection.request({"op": "get", "collection": name})
    if matches:
        accepted(answer, "get")
    else:
        refused(answer, "read", name)


# MARK: - list


@pytest.mark.parametrize("transport", ALL_TRANSPORTS)
def test_list_answers_only_the_collections_its_holder_may_read(daemon, keys, ns, transport):
    for relative in ("a", "b", "c.d", "e.f.g"):
        daemon.seed(f"{ns}.{relative}")
    daemon.seed(f"{ns}x")

    def listed(token):
        if transport == "http":
            status, _, answer = daemon.call("GET", "/v1/collections", token=token)
            assert status == 200, answer
        else:
            with daemon.connect(transport, token) as connection:
                answer = connection.request({"op": "list"})
        accepted(answer, "list")
        return {entry["name"] for entry in answer["collections"]}

    assert listed(mint(keys["es"], sub="lister", read=[f"{ns}.>"])) == {f"{ns}.{r}" for r in ("a", "b", "c.d", "e.f.g")}
    assert listed(mint(keys["es"], sub="lister", read=[f"{ns}.*", f"{ns}.c.d"])) == {f"{ns}.a", f"{ns}.b", f"{ns}.c.d"}
    assert listed(mint(keys["es"], sub="lister", read=[f"{ns}.a"], write=[f"{ns}.b"], drop=[f"{ns}.c.d"])) == {f"{ns}.a"}
    everything = listed(mint(keys["es"], sub="operator", admin=True))
    assert {f"{ns}.a", f"{ns}.b", f"{ns}.c.d", f"{ns}.e.f.g", f"{ns}x"} <= everything


# MARK: - subscribe and get on a missing collection


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_reader_subscribing_to_a_missing_collection_gets_unknown_collection_and_creates_nothing(
        daemon, keys, ns, transport):
    name = f"{ns}.ghost"
    token = mint(keys["rs"], sub="reader", read=[f"{ns}.>"])
    with daemon.connect(transport, token) as connection:
        answer = connection.request({"op": "subscribe", "collection": name})
        assert answer["ok"] is False and answer["error"]["code"] == "unknown_collection", answer
        assert name in answer["error"]["message"], answer
        assert connection.quiet(0.2) == []
        answer = connection.request({"op": "get", "collection": name})
        assert answer["ok"] is False and answer["error"]["code"] == "unknown_collection", answer
    assert daemon.state(name) is None and name not in daemon.names()


def test_a_reader_opening_an_event_stream_on_a_missing_collection_creates_nothing(daemon, keys, ns):
    name = f"{ns}.ghost"
    token = mint(keys["rs"], sub="reader", read=[f"{ns}.>"])
    with daemon.events(name, query_token=token) as stream:
        if stream.status == 200:
            _, kind, data = stream.next()
            assert kind == "error" and data["error"]["code"] == "unknown_collection", (kind, data)
        else:
            assert stream.status == 404 and stream.body["error"]["code"] == "unknown_collection", stream.body
    assert daemon.state(name) is None and name not in daemon.names()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_writer_subscribing_to_a_missing_collection_creates_it_at_version_0(daemon, keys, ns, transport):
    name = f"{ns}.fresh"
    token = mint(keys["ed"], sub="writer", read=[name], write=[name])
    with daemon.connect(transport, token) as connection:
        answer = accepted(connection.request({"op": "subscribe", "collection": name}), "subscribe")
        assert answer["version"] == 0
        snapshot = connection.event()
        assert snapshot["event"] == "snapshot" and snapshot["version"] == 0 and snapshot["sections"] == []
        state = daemon.state(name)
        assert state is not None and state[0] == 0


def test_a_writer_opening_an_event_stream_on_a_missing_collection_creates_it(daemon, keys, ns):
    name = f"{ns}.fresh"
    token = mint(keys["ed"], sub="writer", read=[name], write=[name])
    with daemon.events(name, query_token=token) as stream:
        assert stream.status == 200, stream.body
        _, kind, snapshot = stream.next()
        assert kind == "snapshot" and snapshot["version"] == 0
    assert daemon.state(name)[0] == 0


@pytest.mark.parametrize("transport", ALL_TRANSPORTS)
def test_get_of_a_missing_collection_is_unknown_collection_for_every_holder(daemon, keys, ns, transport):
    name = f"{ns}.ghost"
    for token in (mint(keys["rs"], sub="reader", read=[name]),
                  mint(keys["rs"], sub="writer", read=[name], write=[name]),
                  mint(keys["rs"], sub="operator", admin=True)):
        status, answer = attempt(daemon, transport, token, {"op": "get", "collection": name})
        assert answer["ok"] is False and answer["error"]["code"] == "unknown_collection", answer
        assert status in (None, 404), (status, answer)
    assert daemon.state(name) is None


# MARK: - the Unix socket's owner and the static token


def test_the_unix_socket_without_auth_keeps_its_owners_full_rights(daemon, ns):
    name = f"{ns}.c"
    with daemon.owner() as owner:
        accepted(owner.request({"op": "subscribe", "collection": name}), "subscribe")
        assert owner.event()["version"] == 0
        accepted(owner.request({"op": "append_sections", "collection": name, "sections": [{"id": "s"}]}))
        assert owner.event()["event"] == "changeset"
        accepted(owner.request({"op": "stats"}), "stats")
        assert name in {entry["name"] for entry in owner.request({"op": "list"})["collections"]}
        accepted(owner.request({"op": "drop", "collection": name}), "drop")
        assert owner.event()["event"] == "dropped"


@pytest.fixture(scope="module")
def token_daemon(keys, jwks_dir):
    path = write_jwks(jwks_dir / "static.json", [keys["ed"]])
    with AccessDaemon(["--auth-keys", str(path), "--tcp-token", "s3cret-static"]) as running:
        yield running


def test_the_static_tcp_token_still_carries_every_right_over_tcp(token_daemon, ns):
    name = f"{ns}.c"
    with token_daemon.connect("tcp") as connection:
        refused(connection.request({"op": "get", "collection": name}))  # not yet authenticated
        accepted(connection.request({"op": "auth", "token": "s3cret-static"}), "auth")
        accepted(connection.request({"op": "subscribe", "collection": name}), "subscribe")
        assert connection.event()["version"] == 0
        accepted(connection.request({"op": "append_sections", "collection": name, "sections": [{"id": "s"}]}))
        accepted(connection.request({"op": "stats"}), "stats")
        assert name in {entry["name"] for entry in connection.request({"op": "list"})["collections"]}
        accepted(connection.request({"op": "drop", "collection": name}), "drop")
    assert token_daemon.state(name) is None


def test_the_static_tcp_token_still_carries_every_right_over_http(token_daemon, ns):
    name = f"{ns}.c"
    status, _, answer = token_daemon.call("POST", f"/v1/collections/{name}", {"op": "append_sections",
                                                                              "sections": [{"id": "s"}]})
    assert status == 401, answer
    status, _, answer = token_daemon.call("POST", f"/v1/collections/{name}",
                                          {"op": "append_sections", "sections": [{"id": "s"}]}, token="s3cret-static")
    assert status == 200 and answer["ok"], answer
    status, _, answer = token_daemon.call("GET", f"/v1/collections/{name}", query_token="s3cret-static")
    assert status == 200 and answer["version"] == 1, answer
    status, answers = token_daemon.lines("stats\n", token="s3cret-static")
    assert status == 200 and answers[0]["ok"], answers
    with token_daemon.events(name, query_token="s3cret-static") as stream:
        assert stream.status == 200 and stream.next()[1] == "snapshot"
    with token_daemon.connect("ws", query_token="s3cret-static") as connection:
        accepted(connection.request({"op": "drop", "collection": name}), "drop")
    assert token_daemon.state(name) is None


def test_a_jwt_works_beside_the_static_token(token_daemon, keys, ns):
    name = f"{ns}.c"
    token_daemon.seed(name)
    token = mint(keys["ed"], sub="reader", read=[name])
    with token_daemon.connect("tcp", token) as connection:
        accepted(connection.request({"op": "get", "collection": name}))
        refused(connection.request({"op": "append_items", "collection": name, "items": ["x"]}), "write", name)
    status, _, answer = token_daemon.call("GET", f"/v1/collections/{name}", token=token)
    assert status == 200, answer
    status, _, answer = token_daemon.call("POST", f"/v1/collections/{name}", {"op": "delete_all"}, token=token)
    assert status == 403, answer


# MARK: - a read-only Unix peer (without auth_keys too)


def run_as_nobody(socket_path, lines):
    """The answers to `lines` sent on the Unix socket by a process running as uid 65534."""
    import json
    import os
    import subprocess
    import sys
    script = (
        "import json, socket, sys\n"
        "s = socket.socket(socket.AF_UNIX); s.settimeout(5); s.connect(sys.argv[1])\n"
        "lines = json.loads(sys.argv[2]); f = s.makefile('rb'); out = []\n"
        "for line in lines:\n"
        "    s.sendall(line.encode() + b'\\n')\n"
        "    while True:\n"
        "        m = json.loads(f.readline())\n"
        "        if 'ok' in m: out.append(m); break\n"
        "print(json.dumps(out))\n")

    def demote():
        import os
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)

    # The system's Python: one under /root is out of the other user's reach.
    python = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
    result = subprocess.run([python, "-c", script, socket_path, json.dumps(lines)], capture_output=True,
                            text=True, timeout=10, preexec_fn=demote)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("with_keys", [False, True], ids=["without-auth-keys", "with-auth-keys"])
def test_a_read_only_unix_peer_subscribing_to_a_missing_collection_creates_nothing(keys, jwks_dir, ns, with_keys):
    import os
    if os.geteuid() != 0:
        pytest.skip("needs root to connect as another user")
    arguments = ["--publishers", "uid:0"]
    if with_keys:
        arguments += ["--auth-keys", str(write_jwks(jwks_dir / "unix-peer.json", [keys["ed"]]))]
    with AccessDaemon(arguments, tcp=False, http=False) as running:
        os.chmod(running.directory, 0o755)
        wait_until(lambda: os.path.exists(running.socket_path))
        os.chmod(running.socket_path, 0o777)
        running.seed(f"{ns}.there")
        answers = run_as_nobody(running.socket_path, [
            f"subscribe {ns}.ghost", f"get {ns}.ghost", f"subscribe {ns}.there",
            f'append_items {ns}.there {{"items":["x"]}}'])
        assert answers[0]["ok"] is False and answers[0]["error"]["code"] == "unknown_collection", answers
        assert answers[1]["ok"] is False and answers[1]["error"]["code"] == "unknown_collection", answers
        assert answers[2]["ok"] is True, answers
        assert answers[3]["ok"] is False and answers[3]["error"]["code"] == "unauthorized", answers
        assert running.state(f"{ns}.ghost") is None


# MARK: - every denial logged


@pytest.mark.parametrize("transport", ALL_TRANSPORTS)
def test_every_denial_is_logged_with_its_holder_transport_op_and_collection(daemon, keys, ns, transport):
    name = f"{ns}.c"
    daemon.seed(name)
    token = mint(keys["ed"], sub=f"{ns}-reader", read=[name])
    status, answer = attempt(daemon, transport, token, {"op": "delete_all", "collection": name})
    refused(answer, "write", name, op="delete_all")
    logged = {"unix": "unix", "tcp": "tcp", "ws": "websocket", "http": "http"}[transport]

    def denial_logged():
        return any(" denied " in line and f"collection={name} " in line and f"holder={ns}-reader " in line
                   and "op=delete_all " in line and line.endswith(f"transport={logged}")
                   for line in daemon.log().splitlines())
    wait_until(denial_logged, what=f"the denial over {transport} in the log")


def test_an_origin_is_refused_before_the_token_is_looked_at_and_the_denial_is_logged(keys, ns):
    with AccessDaemon(["--tcp-token", "s3cret", "--http-origins", "https://app.example"], tcp=False) as daemon:
        evil = {"Origin": "https://evil.example"}
        for token in ("wrong", "s3cret", None):
            status, _, answer = daemon.call("GET", "/v1/collections", token=token, headers=evil)
            assert status == 403 and "origin 'https://evil.example' is not allowed" in answer["error"]["message"]
        assert daemon.call("GET", "/", headers=evil)[0] == 403
        assert daemon.call("GET", "/v1/collections", token="s3cret", headers={"Origin": "https://app.example"})[0] == 200
        denials = [line for line in daemon.log().splitlines() if " denied " in line and "op=http " in line]
        assert len(denials) == 4 and all("reason=origin 'https://evil.example' is not allowed" in line
                                         for line in denials), denials
        # The wrong token was never verified, so it counts against nobody.
        assert "wrong token" not in daemon.log()

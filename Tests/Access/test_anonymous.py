"""Rights without a token (SPEC "Scoped access": Without a token; "A connection's rights are
those of its token together with those of auth_anonymous")."""

import pytest

from access_support import (AccessDaemon, WebSocketConnection, accepted, mint, refused, write_jwks)


@pytest.fixture(scope="module")
def anonymous_daemon(keys, jwks_dir):
    path = write_jwks(jwks_dir / "anonymous.json", [keys["rs"], keys["ed"]])
    with AccessDaemon(["--auth-keys", str(path), "--auth-anonymous", '{"read":["public.>"]}']) as running:
        yield running


@pytest.mark.parametrize("transport", ["tcp", "ws"])
def test_a_connection_without_a_token_may_read_public_and_nothing_more(anonymous_daemon, ns, transport):
    public, private = f"public.{ns}.x", f"{ns}.private"
    anonymous_daemon.seed(public)
    anonymous_daemon.seed(private)
    before = anonymous_daemon.state(public)
    with anonymous_daemon.connect(transport) as connection:
        accepted(connection.request({"op": "get", "collection": public}), "get")
        accepted(connection.request({"op": "subscribe", "collection": public}), "subscribe")
        assert connection.event()["event"] == "snapshot"
        refused(connection.request({"op": "append_items", "collection": public, "items": ["x"]}), "write", public)
        refused(connection.request({"op": "drop", "collection": public}), "drop", public)
        refused(connection.request({"op": "get", "collection": private}), "read", private)
        refused(connection.request({"op": "subscribe", "collection": private}), "read", private)
        refused(connection.request({"op": "stats"}), op="stats")
        names = {entry["name"] for entry in accepted(connection.request({"op": "list"}))["collections"]}
        assert public in names and private not in names
        anonymous_daemon.write(public, {"op": "append_items", "items": ["d"]})
        event = connection.event()
        assert event["event"] == "changeset" and event["collection"] == public
    assert anonymous_daemon.state(public) != before and anonymous_daemon.state(public)[0] == before[0] + 1


def test_http_and_event_streams_without_a_token_may_read_public_and_nothing_more(anonymous_daemon, ns):
    public, private = f"public.{ns}.x", f"{ns}.private"
    anonymous_daemon.seed(public)
    anonymous_daemon.seed(private)
    status, _, answer = anonymous_daemon.call("GET", f"/v1/collections/{public}")
    assert status == 200 and answer["ok"], (status, answer)
    status, _, answer = anonymous_daemon.call("POST", f"/v1/collections/{public}", {"op": "delete_all"})
    assert status == 401, (status, answer)
    refused(answer, "write", public)
    status, _, answer = anonymous_daemon.call("GET", f"/v1/collections/{private}")
    assert status == 401, (status, answer)
    refused(answer, "read", private)
    status, _, answer = anonymous_daemon.call("GET", "/v1/collections")
    assert status == 200, answer
    names = {entry["name"] for entry in answer["collections"]}
    assert public in names and private not in names
    with anonymous_daemon.events(public) as stream:
        assert stream.status == 200, stream.body
        assert stream.next()[1] == "snapshot"
    with anonymous_daemon.events(private) as stream:
        assert stream.status == 401, stream.body
    assert anonymous_daemon.state(public)[0] == 1


def test_a_reader_without_write_may_not_create_a_public_collection_by_subscribing(anonymous_daemon, ns):
    ghost = f"public.{ns}.ghost"
    with anonymous_daemon.connect("tcp") as connection:
        answer = connection.request({"op": "subscribe", "collection": ghost})
        assert answer["ok"] is False and answer["error"]["code"] == "unknown_collection", answer
    with anonymous_daemon.events(ghost) as stream:
        if stream.status == 200:
            _, kind, data = stream.next()
            assert kind == "error" and data["error"]["code"] == "unknown_collection", (kind, data)
        else:
            assert stream.status == 404, (stream.status, stream.body)
    assert anonymous_daemon.state(ghost) is None


@pytest.mark.parametrize("transport", ["tcp", "ws", "ws-query-token", "unix"])
def test_a_tokens_rights_join_the_anonymous_ones(anonymous_daemon, keys, ns, transport):
    public, private, elsewhere = f"public.{ns}.x", f"{ns}.private", f"{ns}.elsewhere"
    for name in (public, private, elsewhere):
        anonymous_daemon.seed(name)
    token = mint(keys["rs"], sub="joiner", read=[private])
    if transport == "ws-query-token":
        connection = anonymous_daemon.connect("ws", query_token=token)
    else:
        connection = anonymous_daemon.connect(transport, token)
    with connection:
        accepted(connection.request({"op": "get", "collection": public}), "get")
        accepted(connection.request({"op": "get", "collection": private}), "get")
        refused(connection.request({"op": "get", "collection": elsewhere}), "read", elsewhere)
        refused(connection.request({"op": "append_items", "collection": public, "items": ["x"]}), "write", public)
        accepted(connection.request({"op": "auth", "token": mint(keys["ed"], sub="joiner", write=[public])}))
        accepted(connection.request({"op": "get", "collection": public}), "get")
        refused(connection.request({"op": "get", "collection": private}), "read", private)
        accepted(connection.request({"op": "append_items", "collection": public, "items": ["x"]}))
    assert anonymous_daemon.state(public)[0] == 2
    assert anonymous_daemon.state(private)[0] == 1


def test_a_tokens_rights_join_the_anonymous_ones_over_http(anonymous_daemon, keys, ns):
    public, private = f"public.{ns}.x", f"{ns}.private"
    anonymous_daemon.seed(public)
    anonymous_daemon.seed(private)
    token = mint(keys["ed"], sub="joiner", read=[private])
    for options in ({"token": token}, {"query_token": token}):
        assert anonymous_daemon.call("GET", f"/v1/collections/{public}", **options)[0] == 200
        assert anonymous_daemon.call("GET", f"/v1/collections/{private}", **options)[0] == 200
        status, _, answer = anonymous_daemon.call("POST", f"/v1/collections/{public}", {"op": "delete_all"}, **options)
        assert status == 403, (status, answer)
        refused(answer, "write", public)
    status, _, answer = anonymous_daemon.call("GET", "/v1/collections", token=token)
    names = {entry["name"] for entry in answer["collections"]}
    assert {public, private} <= names, answer
    with anonymous_daemon.events(private, query_token=token) as stream:
        assert stream.status == 200 and stream.next()[1] == "snapshot"
    writer = mint(keys["ed"], sub="joiner", write=[public])
    status, _, answer = anonymous_daemon.call("POST", f"/v1/collections/{public}", {"op": "delete_all"}, token=writer)
    assert status == 200 and answer["ok"], (status, answer)


def test_a_websocket_takes_the_token_from_an_authorization_header(anonymous_daemon, keys, ns):
    private = f"{ns}.private"
    anonymous_daemon.seed(private)
    token = mint(keys["rs"], sub="header", read=[private])
    connection = WebSocketConnection(anonymous_daemon, header=[f"Authorization: Bearer {token}"])
    with connection:
        accepted(connection.request({"op": "get", "collection": private}), "get")


def test_the_unix_socket_without_auth_keeps_its_owners_full_rights_beside_anonymous_ones(anonymous_daemon, ns):
    private = f"{ns}.private"
    with anonymous_daemon.owner() as owner:
        accepted(owner.request({"op": "append_sections", "collection": private, "sections": [{"id": "s"}]}))
        accepted(owner.request({"op": "get", "collection": private}))
        accepted(owner.request({"op": "stats"}))
        accepted(owner.request({"op": "drop", "collection": private}))

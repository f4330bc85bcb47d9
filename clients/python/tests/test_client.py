"""The client against the real daemon: requests, errors, pipelining, and a mirror that stays
equal to `get` through random writes, divergence and a restart."""

import random
import signal
import unicodedata

import pytest

from diffcast import Client, DiffcastError, Mirror
from diffcast.testing import Daemon, Proxy


def test_every_op_round_trips(daemon):
    client = daemon.client()
    assert client.ping()["ok"] is True
    assert client.append_sections("c", [{"id": "s1"}, {"id": "s2", "data": {"title": "two"}}]) == 1
    client.append_items("c", ["a", ("b", {"n": 1})], section="s1")
    client.insert_items("c", [{"id": "c0"}], before="a")
    client.move_item("c", "c0", after="b")
    client.update_items("c", {"a": {"likes": 2}})
    client.reconfigure_items("c", ["a"])
    client.reload_items("c", ["b"])
    client.move_section("c", "s2", before="s1")
    client.update_sections("c", {"s1": {"title": "one"}})
    client.insert_sections("c", [{"id": "s0"}], after="s1")
    client.reload_sections("c", ["s0"])
    client.delete_sections("c", ["s0"])
    client.delete_items("c", ["c0"])
    client.batch("c", [{"op": "append_items", "items": ["x"]}, {"op": "delete_items", "items": ["x"]}])
    state = client.get("c")
    assert [s["id"] for s in state["sections"]] == ["s2", "s1"]
    assert state["sections"][1] == {"id": "s1", "data": {"title": "one"}, "items": [{"id": "a", "data": {"likes": 2}}, {"id": "b", "data": {"n": 1}}]}
    assert [c["name"] for c in client.list()] == ["c"]
    assert client.stats()["collections"] == 1
    client.delete_all("c")
    assert client.get("c")["sections"] == []
    client.drop("c")
    with pytest.raises(DiffcastError) as error:
        client.get("c")
    assert error.value.code == "unknown_collection"


def test_an_error_names_its_culprit_and_changes_nothing(daemon):
    client = daemon.client()
    client.apply("c", [{"id": "s", "items": ["a"]}])
    with pytest.raises(DiffcastError) as error:
        client.append_items("c", ["b", "a"])
    assert error.value.code == "duplicate_identifier" and "'a'" in error.value.message
    with pytest.raises(DiffcastError) as error:
        client.request("update_items", "c", items=[{"id": "a", "dta": 1}])
    assert error.value.code == "invalid_argument" and "dta" in error.value.message
    assert client.get("c")["version"] == 1


def test_pipelined_requests_are_answered_in_order(daemon):
    client = daemon.client()
    client.apply("c", [{"id": "s"}])
    responses = client.pipeline([{"op": "append_items", "collection": "c", "items": [str(n)], "id": n} for n in range(2000)])
    assert [r["id"] for r in responses] == list(range(2000))
    assert all(r["ok"] for r in responses)
    assert len(client.get("c")["sections"][0]["items"]) == 2000


def test_normalization_does_not_merge_identifiers(daemon):
    client = daemon.client()
    nfc, nfd = unicodedata.normalize("NFC", "é"), unicodedata.normalize("NFD", "é")
    client.apply("c", [{"id": "s", "items": [nfc, nfd]}])
    ids = [i["id"] if isinstance(i, dict) else i for i in client.get("c")["sections"][0]["items"]]
    assert ids == [nfc, nfd]


def random_write(rng, state_ids, n):
    kind = rng.choice(["append", "update", "delete", "move", "apply"])
    if kind == "append" or len(state_ids) < 3:
        return "append_items", {"items": [{"id": "i%d" % n, "data": {"v": rng.randint(0, 9)}}]}
    if kind == "update":
        return "update_items", {"items": [{"id": rng.choice(state_ids), "data": {"v": rng.random()}}]}
    if kind == "delete":
        return "delete_items", {"items": [rng.choice(state_ids)]}
    if kind == "move":
        a, b = rng.sample(state_ids, 2)
        return "move_item", {"item": a, "before": b}
    shuffled = list(state_ids)
    rng.shuffle(shuffled)
    return "apply", {"sections": [{"id": "s", "items": shuffled[: len(shuffled) - 1]}, {"id": "t", "items": shuffled[-1:]}]}


def item_ids(state):
    return [i["id"] if isinstance(i, dict) else i for s in state["sections"] for i in s.get("items", [])]


def test_a_followed_mirror_equals_get_at_every_version(daemon):
    writer, reader = daemon.client(), daemon.client()
    writer.apply("c", [{"id": "s"}])
    follow = reader.follow("c", timeout=5)
    event, mirror = next(follow)
    rng = random.Random(7)
    for n in range(300):
        op, arguments = random_write(rng, item_ids(writer.get("c")), n)
        version = writer.request(op, "c", **arguments)["version"]
        while mirror.version < version:
            event, mirror = next(follow)
        state = writer.get("c")
        assert mirror.digest() == state["digest"]
        assert [(sid, [i for i, _ in items]) for sid, items in mirror.items()] == [
            (s["id"], [i["id"] if isinstance(i, dict) else i for i in s.get("items", [])]) for s in state["sections"]
        ]
    assert mirror.divergences == []


def test_a_damaged_event_is_noticed_and_the_follower_resubscribes(daemon):
    proxy = Proxy(daemon.socket_path, daemon.directory)
    writer = daemon.client()
    writer.apply("c", [{"id": "s", "items": ["a"]}])
    follower = Client(proxy.socket_path)
    follow = follower.follow("c", timeout=5)
    next(follow)
    proxy.damage_next_event(lambda line: line.replace(b'"id":"b"', b'"id":"B"'))
    writer.append_items("c", ["b"])
    writer.append_items("c", ["z"])
    event, mirror = next(follow)
    assert len(mirror.divergences) == 1 and "digest" in mirror.divergences[0]
    assert event["event"] == "snapshot"
    assert mirror.digest() == writer.get("c")["digest"]
    proxy.close()


@pytest.mark.parametrize("change", [
    lambda line: line[:-7],
    lambda line: line.replace(b'"id":"b"', b'"id":"\xff"'),
    lambda line: b'{"event":' + b"[" * 100000,
], ids=["cut short", "not UTF-8", "nested too deep"])
def test_an_event_line_that_is_not_json_is_a_divergence_too(daemon, change):
    proxy = Proxy(daemon.socket_path, daemon.directory)
    writer = daemon.client()
    writer.apply("c", [{"id": "s", "items": ["a"]}])
    follow = Client(proxy.socket_path).follow("c", timeout=5)
    next(follow)
    proxy.damage_next_event(change)
    writer.append_items("c", ["b"])
    writer.append_items("c", ["z"])
    event, mirror = next(follow)
    assert len(mirror.divergences) == 1 and "not JSON" in mirror.divergences[0]
    assert event["event"] == "snapshot" and mirror.digest() == writer.get("c")["digest"]
    proxy.close()


def test_a_mirror_resumes_across_a_restart_with_since(tmp_path):
    from conftest import daemon_binary

    with Daemon(daemon_binary(), ["--state-dir", str(tmp_path / "state")]) as daemon:
        client = daemon.client()
        client.apply("c", [{"id": "s", "items": ["a", "b"]}])
        mirror = Mirror()
        follow = client.follow("c", mirror, timeout=5)
        next(follow)
        daemon.restart(signal.SIGKILL)
        client = daemon.client()
        client.update_items("c", {"a": 1})
        follow = daemon.client().follow("c", mirror, timeout=5)
        event, mirror = next(follow)
        assert event["event"] == "changeset" and event["from"] == 1
        assert mirror.digest() == client.get("c")["digest"]

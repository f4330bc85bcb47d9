import json
import queue
import signal
import threading
import time

import pytest
from conftest import Command, binary

from diffcast.testing import Daemon, Proxy


_readers = {}


def read_line(stream, timeout=10):
    """The next line of a child's output (read on a thread, so buffering cannot hide one)."""
    if stream not in _readers:
        lines = queue.Queue()
        threading.Thread(target=lambda: [lines.put(line) for line in stream] + [lines.put(None)], daemon=True).start()
        _readers[stream] = lines
    try:
        return _readers[stream].get(timeout=timeout)
    except queue.Empty:
        raise AssertionError("no output within %ss" % timeout)


def rest_of(stream):
    """The remaining lines of a child's output, once it has ended."""
    lines = []
    while (line := read_line(stream)) is not None:
        lines.append(line.rstrip("\n"))
    return lines


def events_until(process, version, timeout=20):
    """Parsed `sub --json` lines until one brings `version`."""
    events = []
    deadline = time.monotonic() + timeout
    while not events or events[-1].get("version") != version:
        assert time.monotonic() < deadline, "version %d never came: %s" % (version, events[-3:])
        events.append(json.loads(read_line(process.stdout)))
    return events


def assert_chain(events):
    for previous, event in zip(events, events[1:]):
        if event["event"] == "changeset":
            assert event["from"] == previous["version"], (previous, event)


def test_every_command_and_its_json(diffcast):
    assert diffcast.run("ping").stdout == "pong\n"
    assert diffcast.json("ping") == {"ok": True, "op": "ping"}
    assert diffcast.json("apply", "c", "-", input='{"sections":[{"id":"s","items":["a","b"]}]}')["version"] == 1
    diffcast.run("append_sections", "c", "t", "--id", "u", "--data", "title=U")
    diffcast.run("insert_sections", "c", "r", "--before", "s")
    diffcast.run("move_section", "c", "r", "--after", "u")
    diffcast.run("update_sections", "c", "--id", "s", "--data", "n:=1")
    diffcast.run("reload_sections", "c", "t")
    diffcast.run("delete_sections", "c", "t")
    diffcast.run("append_items", "c", "x", "y", "--section", "u")
    diffcast.run("insert_items", "c", "--id", "w", "--data-json", '[1,2]', "--after", "a")
    diffcast.run("move_item", "c", "w", "--before", "a")
    diffcast.run("update_items", "c", "--id", "b", "--data", "v:=true", "--id", "x", "--data", "v=x")
    diffcast.run("reload_items", "c", "a")
    diffcast.run("reconfigure_items", "c", "a", "b")
    diffcast.run("delete_items", "c", "y")
    diffcast.run("batch", "c", '{"ops":[{"op":"append_items","items":["z"]},{"op":"delete_items","items":["z"]}]}')
    state = diffcast.json("get", "c")
    assert state["sections"] == [
        {"id": "s", "data": {"n": 1}, "items": [{"id": "w", "data": [1, 2]}, "a", {"id": "b", "data": {"v": True}}]},
        {"id": "u", "data": {"title": "U"}, "items": [{"id": "x", "data": {"v": "x"}}]},
        {"id": "r", "items": []},
    ]
    readable = diffcast.run("get", "c").stdout.splitlines()
    assert readable[0].startswith("c  version %d  epoch %s  digest %s" % (state["version"], state["epoch"], state["digest"]))
    assert "  [0,2] b {\"v\":true}" in readable
    assert [c["name"] for c in diffcast.json("list")["collections"]] == ["c"]
    assert "collections" in diffcast.run("stats").stdout
    diffcast.run("delete_all", "c")
    assert diffcast.json("get", "c")["sections"] == []
    diffcast.run("drop", "c")
    assert diffcast.run("get", "c", check=False).returncode == 1


def test_awkward_strings_need_no_json_quoting(diffcast):
    awkward = ['disk "sda" at 91%', "back\\slash", "new\nline", "e\u0301 vs \u00e9", "a=b", "$HOME `x`", "'single'"]
    diffcast.run("append_sections", "c", "s")
    arguments = []
    for n, text in enumerate(awkward):
        arguments += ["--id", "-%d" % n, "--data", "msg=" + text, "pct:=%d" % n]
    diffcast.run("append_items", "c", *arguments)
    items = diffcast.json("get", "c")["sections"][0]["items"]
    assert items == [{"id": "-%d" % n, "data": {"msg": text, "pct": n}} for n, text in enumerate(awkward)]
    # The issue's own line.
    diffcast.run("update_items", "c", "--id", "-0", "--data", 'msg=disk "sda" at 91%', "pct:=91")
    assert diffcast.json("get", "c")["sections"][0]["items"][0]["data"] == {"msg": 'disk "sda" at 91%', "pct": 91}


def test_exit_statuses(diffcast, tmp_path):
    diffcast.run("apply", "c", "-", input='[{"id":"s","items":["a"]}]')
    refused = diffcast.run("delete_items", "c", "ghost", check=False)
    assert refused.returncode == 1 and "unknown_item" in refused.stderr and "ghost" in refused.stderr
    duplicate = diffcast.run("append_items", "c", "a", check=False)
    assert duplicate.returncode == 1 and "duplicate_identifier" in duplicate.stderr
    for usage in (["nonsense"], ["get"], ["update_items", "c", "--id", "a", "--data", "n:={"], ["sub", "c", "--since", "3"],
                  ["append_items"], ["move_item", "c", "a", "b"], ["apply", "c", str(tmp_path / "missing.json")]):
        result = diffcast.run(*usage, check=False)
        assert result.returncode == 2, (usage, result.returncode, result.stderr)
        assert result.stderr.strip(), usage
    nowhere = str(tmp_path / "nobody.sock")
    unreachable = diffcast.run("ping", "--socket", nowhere, check=False)
    assert unreachable.returncode == 3 and nowhere in unreachable.stderr and "diffcastd running" in unreachable.stderr
    assert diffcast.run("ping", "--tcp", "127.0.0.1:1", check=False).returncode == 3
    assert diffcast.run("--version").stdout.startswith("diffcast ")


def test_sub_prints_each_change_readably(diffcast):
    diffcast.run("apply", "c", "-", input='[{"id":"s","items":[{"id":"t1","data":{"likes":1000}},"t2","t3","t4"]},{"id":"u"}]')
    sub = diffcast.start("sub", "c", "--count", "5")
    assert read_line(sub.stdout).startswith("c v1 snapshot")
    diffcast.run("append_items", "c", "--id", "t9", "--data", "likes:=1", "--section", "s")
    diffcast.run("update_items", "c", "--id", "t1", "--data", "likes:=2000")
    diffcast.run("move_item", "c", "t4", "--before", "t1")
    diffcast.run("delete_items", "c", "t2")
    assert sub.wait(timeout=20) == 0, sub.stderr.read()
    lines = rest_of(sub.stdout)
    assert '+ [0,4] t9 {"likes":1}' in lines
    assert "~ [0,0] t1 likes 1000→2000" in lines
    assert "↕ t4 [0,3]→[0,0]" in lines
    assert "- [0,2] t2" in lines
    assert sum(line.endswith(" ok") for line in lines) == 4


def test_sub_follows_across_a_daemon_restart(tmp_path):
    with Daemon(binary("diffcastd"), ["--state-dir", str(tmp_path / "state")]) as daemon:
        diffcast = Command(daemon.socket_path)
        diffcast.run("apply", "c", "-", input='[{"id":"s"}]')
        sub = diffcast.start("sub", "c", "--json")
        events = events_until(sub, 1)
        for n in range(5):
            diffcast.run("append_items", "c", "a%d" % n)
        events += events_until(sub, 6)
        daemon.restart(signal.SIGKILL)
        for n in range(5):
            diffcast.run("append_items", "c", "b%d" % n)
        events += events_until(sub, 11)
        sub.send_signal(signal.SIGTERM)
        sub.wait(timeout=10)
        errors = sub.stderr.read()
        assert "reconnecting" in errors
        assert events[0]["event"] == "snapshot" and all(e["event"] == "changeset" for e in events[1:])
        assert_chain(events)
        assert events[-1]["digest"] == diffcast.json("get", "c")["digest"]


def test_sub_survives_being_too_slow(tmp_path):
    with Daemon(binary("diffcastd"), ["--max-unsent-bytes", "4096"]) as daemon:
        diffcast = Command(daemon.socket_path)
        diffcast.run("apply", "c", "-", input='[{"id":"s"}]')
        sub = diffcast.start("sub", "c", "--json")
        events = events_until(sub, 1)
        sub.send_signal(signal.SIGSTOP)
        client = daemon.client()
        writes = [{"op": "append_items", "collection": "c", "items": [{"id": "i%d" % n, "data": {"pad": "x" * 200}}]} for n in range(3000)]
        for start in range(0, len(writes), 100):
            client.pipeline(writes[start:start + 100])
        final = client.get("c")
        sub.send_signal(signal.SIGCONT)
        events += events_until(sub, final["version"], timeout=60)
        sub.terminate()
        sub.wait(timeout=10)
        errors = sub.stderr.read()
        assert "diverged" not in errors
        assert_chain(events)
        assert len(events) < final["version"], "the daemon should have skipped the slow subscriber ahead"
        assert events[-1]["digest"] == final["digest"]
        assert int(daemon.client().stats().get("catch_ups", 1)) >= 1


def test_sub_notices_a_damaged_event_and_subscribes_again(daemon, diffcast):
    proxy = Proxy(daemon.socket_path, daemon.directory)
    through_proxy = Command(proxy.socket_path)
    diffcast.run("apply", "c", "-", input='[{"id":"s","items":["a"]}]')
    sub = through_proxy.start("sub", "c", "--json")
    events = events_until(sub, 1)
    proxy.damage_next_event(lambda line: line.replace(b'"id":"b"', b'"id":"B"'))
    diffcast.run("append_items", "c", "b")
    diffcast.run("append_items", "c", "z")
    events += events_until(sub, 3)
    sub.terminate()
    sub.wait(timeout=10)
    errors = sub.stderr.read()
    assert "diverged" in errors and "digest" in errors
    assert [e["event"] for e in events[1:]].count("snapshot") == 1
    assert events[-1]["digest"] == diffcast.json("get", "c")["digest"]
    proxy.close()

import base64
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
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
    for usage in (["nonsense"], ["get"], ["update_items", "c", "--id", "a", "--data", "n:={"], ["sub", "c", "--state"],
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
        assert int(daemon.client().stats()["catch_ups"]) >= 1


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


def header_lines(collection, lines):
    """The `COLLECTION vN …` lines of `sub`'s readable output: one per event."""
    return [line for line in lines if line.startswith(collection + " v")]


def read_until(stream, predicate, timeout=20):
    """Lines of a child's output up to and including the first that satisfies `predicate`."""
    lines = []
    deadline = time.monotonic() + timeout
    while not lines or not predicate(lines[-1]):
        assert time.monotonic() < deadline, "never came: %s" % lines[-5:]
        line = read_line(stream, timeout=max(0.1, deadline - time.monotonic()))
        assert line is not None, "ended: %s" % lines[-5:]
        lines.append(line.rstrip("\n"))
    return lines


def test_sub_resumes_from_its_state_file_with_one_changeset(diffcast, tmp_path):
    state = tmp_path / "c.mirror"
    diffcast.run("apply", "c", "-", input='[{"id":"s","items":[{"id":"t1","data":{"likes":1}}]}]')
    sub = diffcast.start("sub", "c", "--state", str(state))
    read_until(sub.stdout, lambda line: line.startswith("c v1 snapshot"))
    diffcast.run("append_items", "c", "t2")
    read_until(sub.stdout, lambda line: line.startswith("c v2 "))
    sub.terminate()
    sub.wait(timeout=10)
    kept = [json.loads(line) for line in state.read_text().splitlines()]
    assert [(k["event"], k["collection"], k["version"]) for k in kept] == [("snapshot", "c", 2)]
    assert kept[0]["digest"] == diffcast.json("get", "c")["digest"]

    diffcast.run("update_items", "c", "--id", "t1", "--data", "likes:=2")
    diffcast.run("append_items", "c", "t3")
    diffcast.run("move_item", "c", "t3", "--before", "t1")
    final = diffcast.json("get", "c")
    assert final["version"] == 5
    again = diffcast.start("sub", "c", "--state", str(state))
    lines = read_until(again.stdout, lambda line: line.startswith("c v5"))
    diffcast.run("delete_items", "c", "t2")
    lines += read_until(again.stdout, lambda line: line.startswith("c v6"))
    again.terminate()
    again.wait(timeout=10)
    errors = again.stderr.read()
    assert "resuming c from version 2 (epoch %s) kept in %s" % (final["epoch"], state) in errors
    # One changeset brings the three versions, verified; then the chain goes on.
    assert header_lines("c", lines) == ["c v5 (from v2)  digest %s ok" % final["digest"], lines[-1]]
    assert lines[-1].startswith("c v6  digest ") and lines[-1].endswith(" ok")
    assert "~ [0,1] t1 likes 1→2" in lines and "+ [0,0] t3" in lines
    assert not any("snapshot" in line for line in lines), lines
    assert json.loads(state.read_text())["digest"] == diffcast.json("get", "c")["digest"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.mirror"], "a temporary file was left behind"


def test_sub_of_two_collections_resumes_both_from_one_state_file(diffcast, tmp_path):
    state = tmp_path / "two.mirror"
    for name in ("a", "b"):
        diffcast.run("apply", name, "-", input='[{"id":"s","items":[{"id":"%s1"}]}]' % name)
    sub = diffcast.start("sub", "a", "b", "--state", str(state))
    read_until(sub.stdout, lambda line: line.startswith("a v1 snapshot"))
    read_until(sub.stdout, lambda line: line.startswith("b v1 snapshot"))
    diffcast.run("append_items", "b", "b2")
    read_until(sub.stdout, lambda line: line.startswith("b v2 "))
    sub.terminate()
    sub.wait(timeout=10)
    kept = sorted((k["collection"], k["version"]) for k in map(json.loads, state.read_text().splitlines()))
    assert kept == [("a", 1), ("b", 2)]

    diffcast.run("append_items", "a", "a2")
    diffcast.run("append_items", "b", "b3")
    again = diffcast.start("sub", "a", "b", "--state", str(state))
    lines = read_until(again.stdout, lambda line: line.startswith("a v2") or line.startswith("b v3"))
    lines += read_until(again.stdout, lambda line: line.startswith("a v2") or line.startswith("b v3"))
    again.terminate()
    again.wait(timeout=10)
    errors = again.stderr.read()
    epochs = {name: diffcast.json("get", name)["epoch"] for name in ("a", "b")}
    assert "resuming a from version 1 (epoch %s)" % epochs["a"] in errors, errors
    assert "resuming b from version 2 (epoch %s)" % epochs["b"] in errors, errors
    # Each collection comes back by one changeset from where the file left it, not a snapshot.
    assert any(line.startswith("a v2  digest ") and line.endswith(" ok") for line in lines), lines
    assert any(line.startswith("b v3  digest ") and line.endswith(" ok") for line in lines), lines
    assert not any("snapshot" in line for line in lines), lines
    kept = {k["collection"]: k for k in map(json.loads, state.read_text().splitlines())}
    assert sorted(kept) == ["a", "b"]
    for name in ("a", "b"):
        assert kept[name]["digest"] == diffcast.json("get", name)["digest"]


def test_sub_state_file_is_checked_before_it_is_trusted_or_overwritten(diffcast, tmp_path):
    diffcast.run("apply", "c", "-", input='[{"id":"s","items":["a"]}]')
    notes = tmp_path / "notes.txt"
    notes.write_text("not a mirror\n")
    refused = diffcast.run("sub", "c", "--state", str(notes), check=False)
    assert refused.returncode == 2 and "is not a diffcast state file" in refused.stderr, refused.stderr
    assert notes.read_text() == "not a mirror\n"
    state = tmp_path / "c.mirror"
    diffcast.run("sub", "c", "--state", str(state), "--count", "1")
    kept = json.loads(state.read_text())
    kept["digest"] = "0" * 16
    state.write_text(json.dumps(kept) + "\n")
    damaged = diffcast.run("sub", "c", "--state", str(state), "--count", "1")
    assert "the mirror of c does not verify" in damaged.stderr and "digest" in damaged.stderr
    assert damaged.stdout.startswith("c v1 snapshot")
    assert json.loads(state.read_text())["digest"] == diffcast.json("get", "c")["digest"]


def test_sub_state_file_is_its_owners_alone_and_forgets_a_dropped_collection(diffcast, tmp_path):
    state = tmp_path / "c.mirror"
    diffcast.run("apply", "c", "-", input='[{"id":"s","items":["a"]}]')
    sub = diffcast.start("sub", "c", "--state", str(state))
    read_until(sub.stdout, lambda line: line.startswith("c v1 snapshot"))
    # It holds what the daemon let this user read: nobody else may read it.
    assert state.stat().st_mode & 0o777 == 0o600
    first_epoch = json.loads(state.read_text())["epoch"]
    diffcast.run("drop", "c")
    read_until(sub.stdout, lambda line: line == "c dropped")
    # A dropped collection's mirror would resume nothing: its line goes (a line of the next
    # epoch may already stand in its place, `sub` having subscribed again).
    assert first_epoch not in state.read_text()
    diffcast.wait_for_subscribers("c")
    diffcast.run("append_sections", "c", "t")
    read_until(sub.stdout, lambda line: line == "+ section t [0]")
    sub.terminate()
    sub.wait(timeout=10)
    kept = json.loads(state.read_text())
    made_again = diffcast.json("get", "c")
    assert (kept["epoch"], kept["version"], kept["digest"]) == (
        made_again["epoch"], made_again["version"], made_again["digest"])
    assert kept["epoch"] != first_epoch


def test_sub_state_file_follows_a_new_epoch_across_a_restart(tmp_path):
    state = tmp_path / "c.mirror"
    # In memory: the restarted daemon's collection is another history, with another epoch.
    with Daemon(binary("diffcastd"), []) as daemon:
        diffcast = Command(daemon.socket_path)
        diffcast.run("apply", "c", "-", input='[{"id":"s","items":["a","b"]}]')
        before = diffcast.json("get", "c")
        sub = diffcast.start("sub", "c", "--state", str(state))
        read_until(sub.stdout, lambda line: line.startswith("c v1 snapshot"))
        daemon.restart(signal.SIGKILL)
        diffcast.run("apply", "c", "-", input='[{"id":"s","items":["x"]}]')
        after = diffcast.json("get", "c")
        assert after["epoch"] != before["epoch"]
        # The kept version of the old epoch cannot be resumed: a snapshot of the new one comes
        # (of version 0 if `sub` came back before the write, then the write's changeset).
        lines = read_until(sub.stdout, lambda line: line.startswith("c v1"))
        assert any(line.startswith("c v") and ("snapshot, epoch %s " % after["epoch"]) in line for line in lines), lines
        sub.terminate()
        sub.wait(timeout=10)
        kept = json.loads(state.read_text())
        assert (kept["epoch"], kept["version"], kept["digest"]) == (after["epoch"], 1, after["digest"])


def test_sub_says_once_when_its_state_file_cannot_be_written_and_when_it_can_again(diffcast, tmp_path):
    directory = tmp_path / "kept"
    directory.mkdir()
    state = directory / "c.mirror"
    diffcast.run("apply", "c", "-", input='[{"id":"s"}]')
    sub = diffcast.start("sub", "c", "--state", str(state))
    read_until(sub.stdout, lambda line: line.startswith("c v1 snapshot"))
    kept = state.read_text()
    # Its directory gone (root may write anywhere, so no permission stands in for it).
    shutil.rmtree(directory)
    for n in range(3):
        diffcast.run("append_items", "c", "a%d" % n)
    read_until(sub.stdout, lambda line: line.startswith("c v4 "))
    directory.mkdir()
    diffcast.run("append_items", "c", "b")
    read_until(sub.stdout, lambda line: line.startswith("c v5 "))
    sub.terminate()
    sub.wait(timeout=10)
    errors = sub.stderr.read()
    failed = "cannot write %s.%d.tmp: No such file or directory; %s keeps an earlier version" % (state, sub.pid, state)
    assert errors.count(failed) == 1, errors
    assert errors.count("%s is written again" % state) == 1, errors
    assert json.loads(state.read_text())["version"] == 5 and kept
    assert json.loads(state.read_text())["digest"] == diffcast.json("get", "c")["digest"]


def test_apply_takes_the_json_on_the_command_line(diffcast, tmp_path):
    assert diffcast.run("apply", "c", '{"sections":[{"id":"s","items":["a"]}]}').stdout == "ok, version 1\n"
    diffcast.run("apply", "c", '[{"id":"s","items":["a","b"]}]')
    diffcast.run("apply", "c", "-", input='{"sections":[{"id":"s","items":["a","b","c"]}]}')
    sections = tmp_path / "sections.json"
    sections.write_text('[{"id":"s","items":["a","b","c","d"]}]')
    diffcast.run("apply", "c", str(sections))
    assert diffcast.json("get", "c")["sections"] == [{"id": "s", "items": ["a", "b", "c", "d"]}]
    typo = diffcast.run("apply", "c", '{"sectons":[]}', check=False)
    assert typo.returncode == 2 and "neither" in typo.stderr


def test_a_data_word_without_equals_is_a_usage_error(diffcast):
    diffcast.run("apply", "feed", "-", input='[{"id":"s","items":[{"id":"t1","data":{"likes":1}}]}]')
    for arguments, word in [
        (["append_items", "feed", "--id", "t10", "--data", "note"], "note"),
        (["update_items", "feed", "--id", "t1", "--data", "likes"], "likes"),
        (["update_items", "feed", "--id", "t1", "--data", "likes:=2", "oops"], "oops"),
    ]:
        result = diffcast.run(*arguments, check=False)
        assert result.returncode == 2, (arguments, result.stderr)
        assert "'%s'" % word in result.stderr, result.stderr
        assert "%s=TEXT" % word in result.stderr and "%s:=JSON" % word in result.stderr, result.stderr
    state = diffcast.json("get", "feed")
    assert state["version"] == 1 and state["sections"][0]["items"] == [{"id": "t1", "data": {"likes": 1}}]


def test_drop_says_what_it_dropped(diffcast):
    diffcast.run("append_sections", "feed", "s")
    assert diffcast.run("drop", "feed").stdout == "ok, dropped feed\n"


def test_sub_follows_a_collection_dropped_and_made_again(diffcast):
    diffcast.run("apply", "feed", "-", input='[{"id":"s","items":["a"]}]')
    sub = diffcast.start("sub", "feed")
    read_until(sub.stdout, lambda line: line.startswith("feed v1 snapshot"))
    diffcast.run("drop", "feed")
    read_until(sub.stdout, lambda line: line == "feed dropped")
    diffcast.wait_for_subscribers("feed")
    diffcast.run("append_sections", "feed", "t")
    lines = read_until(sub.stdout, lambda line: line == "+ section t [0]")
    sub.terminate()
    sub.wait(timeout=10)
    assert [line.split("  ")[0].split(",")[0] for line in header_lines("feed", lines)] == ["feed v0 snapshot", "feed v1"]
    epoch = diffcast.json("get", "feed")["epoch"]
    assert any(line.startswith("feed v0 snapshot, epoch %s " % epoch) for line in lines)
    assert "collection 'feed' does not exist yet; waiting for its first write" in sub.stderr.read()


def test_sub_says_when_a_collection_does_not_exist(diffcast):
    diffcast.run("append_sections", "slow", "s")
    typo = diffcast.start("sub", "slwo")
    notice = read_line(typo.stderr)
    typo.terminate()
    typo.wait(timeout=10)
    assert notice == "diffcast: collection 'slwo' does not exist yet; waiting for its first write\n"
    existing = diffcast.run("sub", "slow", "--count", "1")
    assert "does not exist" not in existing.stderr and "subscribed to slow at version 1" in existing.stderr


def test_connect_errors_name_the_path_and_the_cause(tmp_path):
    directory = tmp_path / "a-directory"
    directory.mkdir()
    plain = tmp_path / "a-file"
    plain.write_text("")
    stale = tmp_path / "stale.sock"
    bound = socket.socket(socket.AF_UNIX)
    bound.bind(str(stale))  # bound, never listening: what a daemon that died leaves
    cases = [
        (directory, "it is a directory, not a socket"),
        (plain, "it is a regular file, not a socket"),
        (tmp_path / "missing.sock", "no such file: is diffcastd running"),
        (stale, "connection refused: a stale socket file that no daemon serves"),
    ]
    for path, cause in cases:
        result = Command(str(path)).run("ping", check=False)
        assert result.returncode == 3, result
        assert result.stderr.startswith("diffcast: cannot connect to %s (from $DIFFCAST_SOCKET): %s" % (path, cause)), \
            result.stderr
        assert "left behind" not in result.stderr
    bound.close()


def test_connect_error_says_permission_denied(tmp_path):
    if os.geteuid() == 0 and not shutil.which("setpriv"):
        pytest.skip("root may open any socket, and setpriv is missing to be someone else")
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if os.geteuid() == 0 else []
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o755)
    path = closed / "daemon.sock"
    listening = socket.socket(socket.AF_UNIX)
    listening.bind(str(path))
    listening.listen()
    os.chmod(path, 0)
    result = subprocess.run(
        as_nobody + [binary("diffcast"), "ping", "--socket", str(path)], capture_output=True, text=True, timeout=60)
    listening.close()
    assert result.returncode == 3 and str(path) in result.stderr and "permission denied" in result.stderr, result.stderr


def help_of(diffcast, *command):
    text = diffcast.run(*command, "--help").stdout
    # help2man writes each byte of a character beyond ASCII as '?': the man page showed '???'.
    assert text.isascii(), [line for line in text.splitlines() if not line.isascii()]
    return text


def examples(text):
    """The `$ diffcast …` lines of a help text, without the prompt."""
    lines = [line for line in text.splitlines() if line.lstrip().startswith("$ ")]
    assert all(len(line) <= 80 for line in lines), "an example wraps in 80 columns: %s" % lines
    return [line.lstrip()[2:] for line in lines]


def run_in_shell(diffcast, line, directory):
    result = subprocess.run(["bash", "-c", line], capture_output=True, text=True, env=diffcast.environment,
                            cwd=directory, timeout=60)
    assert result.returncode == 0, (line, result.stderr)
    return result


# The order in which every op's example makes sense on one collection.
OPS = ["append_sections", "insert_sections", "move_section", "update_sections", "reload_sections", "append_items",
       "insert_items", "move_item", "update_items", "reload_items", "reconfigure_items", "delete_items", "batch",
       "delete_sections", "delete_all", "drop"]


def test_help_documents_every_op_with_examples_that_run(diffcast, tmp_path):
    for op in OPS:
        text = help_of(diffcast, op)
        assert "<words>" not in text, op
        (example,) = examples(text)
        assert example.startswith("diffcast %s feed" % op), (op, example)
        run_in_shell(diffcast, example, tmp_path)
    appending = help_of(diffcast, "append_items")
    for option in ("--id <id>", "--data <key=value> ...", "--data-json <json>", "--section <section>"):
        (row,) = [line for line in appending.splitlines() if line.startswith("  " + option + " ")]
        assert row[len(option) + 2:].strip(), "%s has no description" % option
    assert "--before <id>" in help_of(diffcast, "insert_items") and "--after <id>" in help_of(diffcast, "move_section")
    assert "--state <file>" in help_of(diffcast, "sub")

    top = help_of(diffcast)
    lines = examples(top)
    assert len(lines) >= 3 and all(line.startswith("diffcast ") for line in lines)
    for line in lines:  # each one line, as a user pastes it
        run_in_shell(diffcast, line + (" --count 1" if line.startswith("diffcast sub ") else ""), tmp_path)
    assert diffcast.json("get", "feed")["sections"][0]["items"][-1]["data"]["msg"] == 'disk "sda" at 91%'
    (apply_example, _) = examples(help_of(diffcast, "apply"))
    run_in_shell(diffcast, apply_example, tmp_path)
    if shutil.which("help2man"):
        manual = subprocess.run(["help2man", "--no-info", "--version-string", "0", binary("diffcast")],
                                capture_output=True, text=True, env=diffcast.environment, check=True).stdout
        assert "???" not in manual


def test_a_tcp_refusal_says_unauthorized_once_and_where_the_token_goes():
    port = 20000 + os.getpid() % 10000
    with Daemon(binary("diffcastd"), ["--tcp", "127.0.0.1:%d" % port, "--tcp-token", "s3cret"]) as daemon:
        diffcast = Command(daemon.socket_path)
        diffcast.environment.pop("DIFFCAST_TOKEN", None)
        refused = diffcast.run("get", "c", "--tcp", "127.0.0.1:%d" % port, check=False)
        assert refused.returncode == 1, refused.stderr
        assert refused.stderr.count("unauthorized") == 1, refused.stderr
        assert "--tcp-token" in refused.stderr and "DIFFCAST_TOKEN" in refused.stderr, refused.stderr
        diffcast.environment["DIFFCAST_TOKEN"] = "s3cret"
        diffcast.run("apply", "c", '{"sections":[{"id":"s"}]}', "--tcp", "127.0.0.1:%d" % port)
        assert diffcast.json("get", "c", "--tcp", "127.0.0.1:%d" % port)["version"] == 1


def test_diffcast_token_mints_what_the_daemon_verifies(tmp_path):
    # An HS256 key: the daemon holds it as its key set; `diffcast token` signs with it.
    key = {"kty": "oct", "kid": "scripts", "k": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8"}
    (tmp_path / "key.jwk").write_text(json.dumps(key))
    (tmp_path / "keys.json").write_text(json.dumps({"keys": [key]}))
    port = 20000 + (os.getpid() + 7) % 10000
    with Daemon(binary("diffcastd"), ["--tcp", "127.0.0.1:%d" % port, "--auth-keys", str(tmp_path / "keys.json")]) as daemon:
        diffcast = Command(daemon.socket_path)
        token = diffcast.run("token", "--key", str(tmp_path / "key.jwk"), "--sub", "alice", "--read", "inbox.alice",
                             "--write", "inbox.alice", "--ttl", "5m").stdout.strip()
        header, payload, _ = token.split(".")
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        assert claims["sub"] == "alice" and claims["diffcast"]["write"] == ["inbox.alice"]
        assert 290 <= claims["exp"] - claims["iat"] <= 300, claims
        assert json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))["kid"] == "scripts"
        diffcast.environment["DIFFCAST_TOKEN"] = token
        tcp = ("--tcp", "127.0.0.1:%d" % port)
        diffcast.run("apply", "inbox.alice", '{"sections":[{"id":"s","items":["m1"]}]}', *tcp)
        assert diffcast.json("get", "inbox.alice", *tcp)["version"] == 1
        refused = diffcast.run("apply", "inbox.bob", '{"sections":[{"id":"s"}]}', *tcp, check=False)
        assert refused.returncode == 1 and "may not write 'inbox.bob'" in refused.stderr, refused.stderr
        bad = diffcast.run("token", "--key", str(tmp_path / "key.jwk"), "--read", "a..b", check=False)
        assert bad.returncode == 2 and "a..b" in bad.stderr, bad.stderr


def test_the_start_says_how_many_connections_the_descriptors_allow():
    import resource
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard == resource.RLIM_INFINITY or hard > 10_000_000:
        pytest.skip("no finite descriptor limit here")
    with Daemon(binary("diffcastd"), ["--max-connections", str(hard + 1)]) as daemon:
        with daemon.client() as client:
            client.ping()
        log = daemon.log()
    assert "max_connections is above what this process's descriptors allow" in log, log
    assert f"descriptors={hard}" in log and f"connections it can hold={hard - 64}" in log, log

"""The scripts in examples/ run as a user runs them, so they stay true."""

import json
import os
import subprocess
import sys

from conftest import REPOSITORY

EXAMPLES = REPOSITORY / "examples"


def run(command, diffcast, **options):
    return subprocess.run(command, env=diffcast.environment, capture_output=True, text=True, timeout=60, check=True, **options)


def test_counter_pushes_its_count(diffcast):
    environment = dict(diffcast.environment, COUNT="3", INTERVAL="0")
    subprocess.run(["bash", str(EXAMPLES / "counter.sh")], env=environment, check=True, timeout=60)
    items = diffcast.json("get", "demo")["sections"][0]["items"]
    assert [item["id"] for item in items] == ["counter"] and items[0]["data"]["n"] == 3


def test_counter_names_what_it_needs_when_diffcast_is_not_on_path(diffcast, tmp_path):
    bare = dict(diffcast.environment, PATH="/usr/bin:/bin", COUNT="1", INTERVAL="0")
    missing = subprocess.run(["bash", str(EXAMPLES / "counter.sh")], env=bare, capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "DIFFCAST_COMMAND" in missing.stderr, missing.stderr
    named = dict(bare, DIFFCAST_COMMAND=str(REPOSITORY / ".build" / "debug" / "diffcast"))
    subprocess.run(["bash", str(EXAMPLES / "counter.sh")], env=named, check=True, timeout=60)
    assert diffcast.json("get", "demo")["sections"][0]["items"][0]["data"]["n"] == 1


def test_mirror_directory_sends_only_what_changed(diffcast, tmp_path):
    folder = tmp_path / "watched"
    (folder / "sub").mkdir(parents=True)
    for name, size in [("a.txt", 1), ("b.txt", 2), ("sub/c.txt", 3)]:
        (folder / name).write_bytes(b"x" * size)
    script = [sys.executable, str(EXAMPLES / "mirror_directory.py"), str(folder), "files", "--once"]
    run(script, diffcast)
    sub = diffcast.start("sub", "files", "--json", "--count", "2")
    diffcast.wait_for_subscribers("files")
    (folder / "a.txt").write_bytes(b"x" * 10)
    os.remove(folder / "b.txt")
    run(script, diffcast)
    output = sub.communicate(timeout=20)[0].splitlines()
    change = json.loads(output[-1])
    assert change["items"]["updated"][0]["id"] == "./a.txt" and change["items"]["updated"][0]["data"]["bytes"] == 10
    assert [entry["id"] for entry in change["items"]["deleted"]] == ["./b.txt"]
    assert "inserted" not in change["items"]
    state = diffcast.json("get", "files")
    assert [[i["id"] for i in s["items"]] for s in state["sections"]] == [["./a.txt"], ["sub/c.txt"]]


def test_print_changes_prints_each_change(diffcast):
    diffcast.run("apply", "feed", "-", input='[{"id":"s","items":["a"]}]')
    printer = subprocess.Popen(
        [sys.executable, str(EXAMPLES / "print_changes.py"), "feed", "--count", "3"],
        env=diffcast.environment, stdout=subprocess.PIPE, text=True)
    diffcast.wait_for_subscribers("feed")
    diffcast.run("append_items", "feed", "--id", "b", "--data", "n:=1")
    diffcast.run("update_items", "feed", "--id", "a", "--data", "n:=2")
    output = printer.communicate(timeout=20)[0].splitlines()
    assert output == ["v1: 1 items", "v2 + b {'n': 1}", "v3 ~ a {'n': 2}"]

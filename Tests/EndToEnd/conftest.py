"""The `diffcast` command and the examples, driven as a user drives them: real processes
against a real daemon, output parsed."""

import json
import os
import pathlib
import subprocess
import sys
import time

import pytest

REPOSITORY = pathlib.Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(REPOSITORY / "clients" / "python"))

from diffcast.testing import Daemon  # noqa: E402

BUILD = REPOSITORY / ".build" / "debug"


def binary(name):
    return os.environ.get(name.upper()) or str(BUILD / name)


@pytest.fixture
def daemon():
    with Daemon(binary("diffcastd")) as running:
        yield running


class Command:
    """Runs `diffcast` against one daemon; `json(...)` parses `--json` output."""

    def __init__(self, socket_path):
        self.environment = dict(os.environ, DIFFCAST_SOCKET=socket_path, NO_COLOR="1")
        self.environment["PATH"] = str(BUILD) + os.pathsep + self.environment.get("PATH", "")

    def run(self, *arguments, input=None, check=True):
        result = subprocess.run(
            [binary("diffcast"), *arguments], input=input, capture_output=True, text=True, env=self.environment, timeout=60
        )
        if check and result.returncode != 0:
            raise AssertionError("diffcast %s exited %d: %s" % (" ".join(arguments), result.returncode, result.stderr))
        return result

    def json(self, *arguments, input=None):
        return json.loads(self.run(*arguments, "--json", input=input).stdout)

    def wait_for_subscribers(self, collection, count=1, timeout=10):
        """Returns once the daemon lists `count` subscribers of the collection."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            listed = {c["name"]: c["subscribers"] for c in self.json("list")["collections"]}
            if listed.get(collection, 0) >= count:
                return
            time.sleep(0.02)
        raise AssertionError("nobody subscribed to %s" % collection)

    def start(self, *arguments):
        return subprocess.Popen(
            [binary("diffcast"), *arguments], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=self.environment
        )


@pytest.fixture
def diffcast(daemon):
    return Command(daemon.socket_path)

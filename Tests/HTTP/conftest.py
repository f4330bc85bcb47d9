"""The HTTP front end as a browser, curl or a script meets it: the real daemon with --http,
real HTTP over TCP on loopback."""

import json
import os
import pathlib
import socket
import sys
import urllib.error
import urllib.request

import pytest

REPOSITORY = pathlib.Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(REPOSITORY / "clients" / "python"))

from diffcast.testing import Daemon  # noqa: E402


def binary(name):
    return os.environ.get(name.upper()) or str(REPOSITORY / ".build" / "debug" / name)


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class HTTPDaemon(Daemon):
    """diffcastd with its HTTP front end on a free loopback port."""

    def __init__(self, arguments=(), **options):
        self.port = free_port()
        super().__init__(binary("diffcastd"), ["--http", f"127.0.0.1:{self.port}", *arguments], **options)

    def start(self, attempts=3):
        """Starts the daemon and waits for its socket and its HTTP port. A port another process
        took between its choice and the daemon's bind is chosen again, up to `attempts` times."""
        log_start = len(self.log()) if os.path.exists(self.log_path) else 0
        try:
            super().start()
        except OSError:
            if attempts > 1 and self.process.poll() is not None and "address already in use" in self.log()[log_start:]:
                self.port = free_port()
                self.arguments[self.arguments.index("--http") + 1] = f"127.0.0.1:{self.port}"
                return self.start(attempts - 1)
            raise
        # The Unix socket may be up before the HTTP port: wait for both.
        self.wait_for(self.http_is_up, what=f"the HTTP port {self.port}")
        return self

    def http_is_up(self):
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return False

    @property
    def base(self):
        return f"http://127.0.0.1:{self.port}"

    def call(self, method, path, body=None, headers=None):
        """(status, headers, parsed JSON or text) of one request."""
        data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                status, answer_headers, raw = response.status, response.headers, response.read()
        except urllib.error.HTTPError as error:
            status, answer_headers, raw = error.code, error.headers, error.read()
        text = raw.decode()
        try:
            return status, answer_headers, json.loads(text)
        except ValueError:
            return status, answer_headers, text


@pytest.fixture
def http_daemon():
    with HTTPDaemon() as running:
        yield running

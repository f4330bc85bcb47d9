"""Where a client connects by default, and what it says when it cannot."""

import errno
import os
import shutil
import socket
import subprocess
import sys
import tempfile

import pytest

import diffcast
from diffcast import CannotConnect, Client, connect_with_retry, default_socket
from diffcast import client as client_module

from conftest import REPOSITORY


@pytest.fixture
def places(tmp_path, monkeypatch):
    """The service's and /tmp's socket paths moved into a temporary folder."""
    system, fallback = tmp_path / "run.sock", tmp_path / "tmp.sock"
    monkeypatch.setattr(client_module, "SYSTEM_SOCKET", str(system))
    monkeypatch.setattr(client_module, "DEFAULT_SOCKET", str(fallback))
    monkeypatch.delenv("DIFFCAST_SOCKET", raising=False)
    return system, fallback


def test_the_default_socket_is_the_environments_then_the_services_then_tmps(places, monkeypatch):
    system, fallback = places
    assert default_socket() == str(fallback)
    system.touch()
    assert default_socket() == str(system)
    monkeypatch.setenv("DIFFCAST_SOCKET", "/somewhere/else.sock")
    assert default_socket() == "/somewhere/else.sock"


def test_the_defaults_are_those_of_the_diffcast_command(monkeypatch):
    command = REPOSITORY / ".build" / "debug" / "diffcast"
    if not command.exists():
        pytest.skip("no diffcast command built")
    environment = {k: v for k, v in os.environ.items() if k not in ("DIFFCAST_SOCKET", "DIFFCAST_TCP")}
    result = subprocess.run([str(command), "list"], env=environment, capture_output=True, text=True, timeout=30)
    if result.returncode == 0:
        pytest.skip("a daemon answers on the default socket")
    monkeypatch.delenv("DIFFCAST_SOCKET", raising=False)
    # The command names the socket it tried (and then why): the one the Python client picks too.
    assert "cannot connect to %s " % default_socket() in result.stderr or "cannot connect to %s:" % default_socket() in result.stderr


def test_a_client_without_a_path_uses_diffcast_socket(daemon, monkeypatch):
    monkeypatch.setenv("DIFFCAST_SOCKET", daemon.socket_path)
    with Client() as client:
        assert client.socket_path == daemon.socket_path and client.ping()["ok"]


def test_no_socket_names_the_path_and_says_the_daemon_is_not_running(places):
    _, fallback = places
    with pytest.raises(CannotConnect) as error:
        Client()
    message = str(error.value)
    assert error.value.errno == errno.ENOENT and error.value.endpoint == str(fallback)
    assert message.startswith("cannot connect to %s: no socket at %s" % (fallback, fallback))
    assert "diffcastd running" in message and "DIFFCAST_SOCKET" in message
    assert not isinstance(error.value, FileNotFoundError) and isinstance(error.value, OSError)


def test_a_stale_socket_file_is_named_as_such(tmp_path):
    path = str(tmp_path / "stale.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(path)  # a daemon that died and left its socket behind: nobody listens
    with pytest.raises(CannotConnect) as error:
        Client(path)
    assert error.value.errno == errno.ECONNREFUSED
    assert str(error.value) == (
        "cannot connect to %s: nobody listens on %s: diffcastd is not running (a socket file left behind)" % (path, path))


def test_permission_denied_says_so():
    """A socket that only its owner may use, tried by another user (as root: by nobody, with a
    Python that nobody may run)."""
    as_root = os.geteuid() == 0
    interpreter = shutil.which("python3", path=os.defpath) if as_root else sys.executable
    if interpreter is None:
        pytest.skip("no python3 on %s for another user" % os.defpath)
    folder = tempfile.mkdtemp(prefix="diffcast-permission-")
    try:
        os.chmod(folder, 0o755)
        shutil.copytree(os.path.dirname(diffcast.__file__), os.path.join(folder, "diffcast"))
        path = os.path.join(folder, "d.sock")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
            listener.bind(path)
            listener.listen(1)
            os.chmod(path, 0o600 if as_root else 0o000)
            script = "from diffcast import *\ntry:\n Client(%r)\nexcept CannotConnect as e:\n print(e.errno, e)" % path
            try:
                result = subprocess.run([interpreter, "-c", script], env={"PYTHONPATH": folder}, capture_output=True,
                                        text=True, timeout=30, user=65534 if as_root else None)
            except PermissionError:
                pytest.skip("cannot run %s as another user here" % interpreter)
    finally:
        shutil.rmtree(folder)
    assert result.stdout.startswith("%d cannot connect to %s: permission denied on %s" % (errno.EACCES, path, path)), result
    assert "group" in result.stdout


def test_connect_with_retry_waits_for_a_socket_and_gives_up_naming_it(tmp_path):
    path = str(tmp_path / "never.sock")
    with pytest.raises(CannotConnect) as error:
        connect_with_retry(path, attempts=3, delay=0.01)
    assert error.value.endpoint == path


def test_a_tcp_endpoint_that_refuses_is_named():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound, not listening: connecting is refused
        with pytest.raises(CannotConnect) as error:
            Client(tcp=("127.0.0.1", port))
    assert error.value.endpoint == "127.0.0.1:%d" % port and error.value.errno == errno.ECONNREFUSED

"""The backbone lets no one in either: a real nats-server (JetStream, one node) that requires
credentials, over TLS with a certificate made here. A daemon with the right credentials joins
and serves; wrong or missing ones stop its start with a message that says so."""

import pathlib
import random
import shutil
import signal
import subprocess
import sys
import time

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from cluster import BackboneDaemon, diffcastd  # noqa: E402

if not shutil.which("nats-server"):
    pytest.skip("nats-server is not installed", allow_module_level=True)


class Server:
    """One nats-server with JetStream that lets in only `users` (or the `token`), over TLS."""

    def __init__(self, directory, authorization, attempts=3):
        self.directory = pathlib.Path(directory)
        certificate, key = self.directory / "cert.pem", self.directory / "key.pem"
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
             "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
             "-keyout", str(key), "-out", str(certificate)],
            check=True, capture_output=True)
        self.ca = str(certificate)
        # A port below the kernel's ephemeral range (32768 and up), where no connection's own end
        # lands; one that is taken all the same is chosen again.
        for attempt in range(attempts):
            self.port = random.randrange(10000, 20000)
            if self.start(certificate, key, authorization):
                break
            assert attempt < attempts - 1, (self.directory / "nats.log").read_text()
        self.url = f"nats://127.0.0.1:{self.port}"

    def start(self, certificate, key, authorization):
        """Starts nats-server on `self.port`: true once it is ready, false when the port was taken."""
        config = self.directory / "nats.conf"
        config.write_text(
            f"""
listen: 127.0.0.1:{self.port}
jetstream {{ store_dir: "{self.directory / 'js'}" }}
tls {{ cert_file: "{certificate}", key_file: "{key}" }}
authorization {{ {authorization} }}
""")
        self.log = open(self.directory / "nats.log", "wb")
        self.process = subprocess.Popen(["nats-server", "-c", str(config)], stdout=self.log, stderr=self.log)
        log = self.directory / "nats.log"
        deadline = time.monotonic() + 10
        while b"Server is ready" not in log.read_bytes():
            if self.process.poll() is not None and b"address already in use" in log.read_bytes():
                self.log.close()
                return False
            assert time.monotonic() < deadline and self.process.poll() is None, log.read_text()
            time.sleep(0.05)
        return True

    def close(self):
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=10)
        self.log.close()


class Cluster:
    """What BackboneDaemon needs of a cluster: its URLs."""

    def __init__(self, url):
        self.urls = url


def refused_start(server, *arguments):
    """Starts a daemon that must not come up; its exit status and what it said."""
    directory = server.directory / f"refused-{random.randrange(1 << 30)}"
    directory.mkdir()
    started = subprocess.run(
        [diffcastd(), "--socket", str(directory / "d.sock"), "--backbone", server.url, "--backbone-replicas", "1",
         *arguments],
        capture_output=True, text=True, timeout=60)
    return started.returncode, started.stderr


@pytest.fixture
def password_server(tmp_path):
    server = Server(tmp_path, 'users = [ { user: "diffcast", password: "s3cret" } ]')
    yield server
    server.close()


def test_a_daemon_with_the_right_credentials_joins_over_tls_and_serves(password_server):
    arguments = ("--backbone-replicas", "1", "--backbone-user", "diffcast", "--backbone-password", "s3cret",
                 "--backbone-tls-ca", password_server.ca)
    with BackboneDaemon(Cluster(password_server.url), extra=arguments) as daemon:
        with daemon.client() as client:
            client.request("apply", "c", sections=[{"id": "s", "items": ["a", "b"]}])
            state = client.get("c")
            assert [item for section in state["sections"] for item in section["items"]] == ["a", "b"]
            assert state["version"] == 1


@pytest.mark.parametrize("credentials,named", [
    (("--backbone-user", "diffcast", "--backbone-password", "wrong"), "refused this daemon's credentials"),
    ((), "refused this daemon's credentials"),
    (("--backbone-token", "guess"), "refused this daemon's credentials"),
])
def test_wrong_or_missing_credentials_stop_the_start_and_say_so(password_server, credentials, named):
    status, said = refused_start(password_server, "--backbone-tls-ca", password_server.ca, *credentials)
    assert status == 1 and named in said, said


def test_without_the_servers_ca_the_start_says_tls_failed(password_server):
    status, said = refused_start(password_server, "--backbone-user", "diffcast", "--backbone-password", "s3cret")
    assert status == 1 and "connecting to" in said, said


def test_a_token_server_lets_in_the_token_alone(tmp_path):
    server = Server(tmp_path, 'token: "t0ken-for-daemons"')
    try:
        status, said = refused_start(server, "--backbone-tls-ca", server.ca, "--backbone-token", "other")
        assert status == 1 and "refused this daemon's credentials" in said, said
        arguments = ("--backbone-replicas", "1", "--backbone-token", "t0ken-for-daemons", "--backbone-tls-ca", server.ca)
        with BackboneDaemon(Cluster(server.url), extra=arguments) as daemon:
            with daemon.client() as client:
                client.request("append_sections", "c", sections=[{"id": "s"}])
                assert client.get("c")["version"] == 1
    finally:
        server.close()


def test_credentials_that_contradict_are_refused_by_the_settings(tmp_path):
    started = subprocess.run(
        [diffcastd(), "--socket", str(tmp_path / "d.sock"), "--backbone", "nats://127.0.0.1:4222",
         "--backbone-user", "a", "--backbone-password", "b", "--backbone-token", "c"],
        capture_output=True, text=True, timeout=30)
    assert started.returncode == 1 and "alternatives" in started.stderr, started.stderr

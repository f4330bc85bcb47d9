"""A 3-node NATS JetStream cluster and daemons joined to it as a backbone, for the backbone's
tests and benchmark: real nats-server and diffcastd processes on loopback, in a temporary folder,
every process stopped at the end."""

import json
import os
import pathlib
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

REPOSITORY = pathlib.Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(REPOSITORY / "clients" / "python"))

from diffcast import Client, DiffcastError  # noqa: E402
from diffcast.mirror import Divergence  # noqa: E402
from diffcast.testing import Daemon  # noqa: E402

SCRIPT = REPOSITORY / "scripts" / "nats-cluster.sh"


def diffcastd():
    return os.environ.get("DIFFCASTD") or str(REPOSITORY / ".build" / "debug" / "diffcastd")


class Cluster:
    """Three nats-servers; `urls` for --backbone; `stream_leader()` and `kill(n)` for failures."""

    def __init__(self, attempts=3):
        # Ports below the kernel's ephemeral range (32768 and up); a cluster that could not bind
        # one of them (a server left over from elsewhere) is stopped and started on others.
        for attempt in range(attempts):
            self.directory = tempfile.mkdtemp(prefix="diffcast-nats-")
            self.port = random.randrange(20000, 30000, 10)
            output = subprocess.run(
                [str(SCRIPT), "start", self.directory, str(self.port)], capture_output=True, text=True, timeout=60
            )
            if output.returncode == 0:
                break
            subprocess.run([str(SCRIPT), "stop", self.directory], timeout=30)
            logs = "".join(path.read_text(errors="replace") for path in pathlib.Path(self.directory).glob("n*/log"))
            if "address already in use" not in logs or attempt == attempts - 1:
                raise RuntimeError(output.stderr + output.stdout + logs[-2000:])
            shutil.rmtree(self.directory, ignore_errors=True)
        self.urls = ",".join(f"nats://127.0.0.1:{self.port + n}" for n in range(3))

    def pid(self, n):
        return int(pathlib.Path(self.directory, f"n{n}", "pid").read_text())

    def monitor(self, n, path):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port + 200 + n}{path}", timeout=5) as response:
            return json.load(response)

    def stream_leader(self, stream="DIFFCAST_LOG"):
        """The server number (0-2) leading `stream`, asked of any live server."""
        for n in range(3):
            try:
                details = self.monitor(n, "/jsz?streams=true")
            except OSError:
                continue
            for account in details.get("account_details") or []:
                for entry in account.get("stream_detail") or []:
                    if entry["name"] == stream and entry.get("cluster", {}).get("leader"):
                        return int(entry["cluster"]["leader"][1:])
        raise RuntimeError(f"no leader for {stream}")

    def kill(self, n):
        os.kill(self.pid(n), signal.SIGKILL)

    def restart(self, n):
        config = pathlib.Path(self.directory, f"n{n}", "nats.conf")
        log = open(pathlib.Path(self.directory, f"n{n}", "log"), "ab")
        process = subprocess.Popen(["nats-server", "-c", str(config)], stdout=log, stderr=log)
        pathlib.Path(self.directory, f"n{n}", "pid").write_text(str(process.pid))

    def close(self):
        subprocess.run([str(SCRIPT), "stop", self.directory], timeout=30)
        shutil.rmtree(self.directory, ignore_errors=True)


class BackboneDaemon(Daemon):
    """A diffcastd joined to the cluster."""

    # Joining waits for the cluster's JetStream (a fresh cluster first elects its meta leader, and
    # the stream is made with 3 replicas): seconds under load, more than a plain daemon's start.
    start_seconds = 30

    def __init__(self, cluster, owner=True, lease_ms=1500, extra=()):
        arguments = ["--backbone", cluster.urls, "--backbone-lease-ms", str(lease_ms)]
        arguments += ["--backbone-owner", "true" if owner else "false", *extra]
        super().__init__(diffcastd(), arguments)

    def kill(self):
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)


class Writer(threading.Thread):
    """Appends items with unique ids to a collection through one daemon, one at a time,
    retrying `unavailable`; keeps the ids acknowledged, each with when it was sent and when its
    answer came."""

    def __init__(self, daemon, collection, name):
        super().__init__(daemon=True)
        self.daemon_under_test = daemon
        self.collection = collection
        self.name = name
        self.acknowledged = []
        self.refusals = []
        self.stopping = threading.Event()

    def run(self):
        client = self.daemon_under_test.client(timeout=30)
        count = 0
        while not self.stopping.is_set():
            item = f"{self.name}-{count}"
            sent = time.monotonic()
            try:
                client.append_items(self.collection, [item])
            except DiffcastError as error:
                if error.code == "duplicate_identifier":  # an earlier try was applied after all
                    count += 1
                else:
                    self.refusals.append((time.monotonic(), error.code))
                    time.sleep(0.05)
                continue
            self.acknowledged.append((time.monotonic(), item, sent))
            count += 1
        client.close()


class Subscriber(threading.Thread):
    """Follows a collection through one daemon with a verified mirror; keeps every version it
    went through, and any gap or divergence."""

    def __init__(self, daemon, collection, resuming=None):
        super().__init__(daemon=True)
        self.daemon_under_test = daemon
        self.collection = collection
        self.versions = list(resuming.versions) if resuming else []
        self.gaps = list(resuming.gaps) if resuming else []
        self.mirror = resuming.mirror if resuming else None
        self.ended = None

    def resumed_on(self, daemon):
        """A subscriber that goes on where this one stopped (same mirror, `since` and epoch),
        on another daemon."""
        return Subscriber(daemon, self.collection, resuming=self)

    def run(self):
        client = self.daemon_under_test.client()
        try:
            for event, mirror in client.follow(self.collection, mirror=self.mirror):
                self.mirror = mirror
                if event["event"] == "changeset" and self.versions and event["from"] != self.versions[-1]:
                    self.gaps.append((self.versions[-1], event["from"]))
                self.versions.append(event.get("to", event.get("version")))
            self.ended = "the daemon closed the connection"
        except (OSError, ValueError, Divergence) as error:
            self.ended = str(error)
        finally:
            client.close()


def wait_until(condition, timeout=30, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise TimeoutError(what)


def state(daemon, collection):
    with daemon.client() as client:
        return client.get(collection)

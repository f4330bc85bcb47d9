#!/usr/bin/env python3
"""The backbone under faults, many times over: a bounded soak.

    DIFFCASTD=.build/debug/diffcastd python3 Tests/Backbone/soak.py --cycles 20 [--seed N]

Three nats-servers and three daemons (two that may own collections, one that never does),
two collections, writers on two daemons (each alternating between the collections, retrying
`unavailable`), and verified subscribers (the Python client's `follow()` with its
digest-checking mirror) on all three daemons for both collections. Each cycle injects one fault
drawn from a seeded RNG (the seed is printed; `--seed` replays the draw):

  daemon-kill     kill -9 a daemon, restart it after 0.5-2 s
  daemon-stop     SIGSTOP a daemon for 2-4 s (past its lease), then SIGCONT
  nats-kill       kill -9 a nats-server, restart it after 1-3 s
  leader-kill     kill -9 the stream's leader (DIFFCAST_LOG), restart it after 1-3 s
  nats-stop       SIGSTOP a nats-server for 2-5 s, then SIGCONT

After each cycle the writers stop, the daemons must converge (same version, epoch and digest
for each collection on every daemon, within --converge-timeout), every write ever acknowledged
must be held exactly once, and every subscriber's chain must be gapless, its mirror verified
and at the final version with the final digest. A subscriber whose daemon dies resumes on
another daemon from its mirror's version and epoch (and goes home once its daemon is back).
Then the writers start again.

Per cycle it prints the fault, the failover (first acknowledged write sent after the fault;
and the time until every writer had one), the longest pause between acknowledgements (from the
fault until the writers stop), the time to converge after the writers stopped, the versions,
the delivery spread (how much later the last subscriber of a collection reached a version than
the first one did), and what the daemons' logs and their `stats` (backbone.log_behind, sampled
every 0.25 s) say about the shared log's follower: "following it anew" (the watch that
re-follows the log when its consumer stalls), stalls (log_behind > 0 in consecutive samples;
the daemon refreshes it once a second, and not while it cannot reach the stream), and log
messages a daemon skipped. A summary table ends the run; the exit status is 0
only with no lost acknowledged write, no non-converged cycle, no subscriber gap or divergence.

Every wait is bounded in count and time; everything started is stopped at the end (also on
Ctrl-C or SIGTERM). The run's folder (logs of every process) is removed unless --keep or a
failure.
"""

import argparse
import collections
import errno
import os
import pathlib
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from cluster import Cluster, diffcastd  # noqa: E402
from diffcast import Client, DiffcastError  # noqa: E402
from diffcast.client import CannotConnect  # noqa: E402
from diffcast.testing import Daemon  # noqa: E402

FAULTS = ("daemon-kill", "daemon-stop", "nats-kill", "leader-kill", "nats-stop")
COLLECTIONS = ("soak-a", "soak-b")
SECTION_SIZE = 100  # items per section: the mirror re-hashes a touched section whole


def now():
    return time.monotonic()


def log(message):
    print(message, flush=True)


class SoakDaemon(Daemon):
    """A diffcastd joined to the cluster, in a folder of the run; `state` is up, stopped or dead."""

    def __init__(self, number, cluster, directory, owner, lease_ms, snapshot_every):
        arguments = ["--backbone", cluster.urls, "--backbone-lease-ms", str(lease_ms)]
        arguments += ["--backbone-owner", "true" if owner else "false", "--backbone-snapshot-every", str(snapshot_every)]
        os.makedirs(directory, exist_ok=True)
        super().__init__(diffcastd(), arguments, directory=directory)
        self.number = number
        self.owner = owner
        self.state = "dead"
        self.start_failures = []

    def start(self, timeout=60, attempts=5):
        """Starts and waits (bounded) until it serves: a daemon applies the whole log first. A
        start that fails (the daemon exits, e.g. "cannot start: looking up stream …: Timeout"
        while the cluster recovers from a fault) is tried again, up to `attempts` times; the
        failures are kept in `start_failures`."""
        for attempt in range(attempts):
            self.started_at_offset = self.log_size()
            with open(self.log_path, "ab") as log_file:
                self.process = subprocess.Popen(
                    [self.binary, "--socket", self.socket_path] + self.arguments,
                    stdout=subprocess.DEVNULL, stderr=log_file,
                )
            deadline = now() + timeout
            while self.process.poll() is None:
                try:
                    Client(self.socket_path, timeout=5).close()
                    self.state = "up"
                    return self
                except CannotConnect as error:
                    if error.errno not in (errno.ENOENT, errno.ECONNREFUSED) or now() > deadline:
                        raise
                time.sleep(0.05)
            last = (self.log_since(self.started_at_offset).strip().splitlines() or ["(nothing logged)"])[-1]
            self.start_failures.append((now(), self.process.returncode, last))
            if attempt + 1 < attempts:
                time.sleep(1)
        raise RuntimeError(f"daemon d{self.number} did not start in {attempts} attempts; see {self.log_path}")

    def kill(self):
        self.state = "dead"
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def pause(self):
        self.state = "stopped"
        self.process.send_signal(signal.SIGSTOP)

    def resume(self):
        self.process.send_signal(signal.SIGCONT)
        self.state = "up"

    def log_size(self):
        try:
            return os.path.getsize(self.log_path)
        except OSError:
            return 0

    def log_since(self, offset):
        with open(self.log_path, "rb") as file:
            file.seek(offset)
            return file.read().decode("utf-8", "replace")

    def shutdown(self):
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)
        self.state = "dead"


class NatsServers:
    """The cluster's servers as processes: kill, restart, stop and continue by number."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.children = {}
        self.stopped = set()

    def signal(self, n, sig):
        os.kill(self.cluster.pid(n), sig)

    def kill(self, n):
        self.signal(n, signal.SIGKILL)
        child = self.children.pop(n, None)
        if child:
            child.wait(timeout=10)

    def restart(self, n):
        config = pathlib.Path(self.cluster.directory, f"n{n}", "nats.conf")
        with open(pathlib.Path(self.cluster.directory, f"n{n}", "log"), "ab") as out:
            process = subprocess.Popen(["nats-server", "-c", str(config)], stdout=out, stderr=out)
        pathlib.Path(self.cluster.directory, f"n{n}", "pid").write_text(str(process.pid))
        self.children[n] = process

    def pause(self, n):
        self.stopped.add(n)
        self.signal(n, signal.SIGSTOP)

    def resume(self, n):
        self.signal(n, signal.SIGCONT)
        self.stopped.discard(n)

    def close(self, keep_logs_in=None):
        for n in range(3):
            try:
                self.signal(n, signal.SIGCONT)
            except (OSError, ValueError):
                pass
        if keep_logs_in:
            for n in range(3):
                try:
                    shutil.copy(pathlib.Path(self.cluster.directory, f"n{n}", "log"), os.path.join(keep_logs_in, f"nats-n{n}.log"))
                except OSError:
                    pass
        self.cluster.close()
        for child in self.children.values():
            try:
                child.wait(timeout=10)
            except Exception:
                child.kill()


class Writer(threading.Thread):
    """Writes unique items through one daemon, alternating between the collections; a new
    section every SECTION_SIZE items of a collection. Retries the same write after
    `unavailable` or a lost connection (then through the next daemon that is up, home first);
    `duplicate_identifier` on a retry means an earlier try was applied after all (it counts as
    applied, not as acknowledged). Keeps (acknowledged at, collection, item, sent at, version)."""

    def __init__(self, name, home, daemons, delay):
        super().__init__(daemon=True)
        self.name = name
        self.home = home
        self.daemons = daemons
        self.delay = delay
        self.acknowledged = []
        self.refusals = collections.Counter()
        self.reconnects = 0
        self.maybe_applied = 0
        self.stopping = threading.Event()
        self.error = None

    def _connect(self):
        order = [self.home] + [d for d in self.daemons if d is not self.home]
        for daemon in order:
            if daemon.state != "up":
                continue
            try:
                return Client(daemon.socket_path, timeout=40)
            except OSError:
                continue
        return None

    def run(self):
        client = None
        count = 0
        try:
            while not self.stopping.is_set():
                if client is None:
                    client = self._connect()
                    if client is None:
                        time.sleep(0.1)
                        continue
                collection = COLLECTIONS[count % 2]
                n = count // 2
                item = f"{self.name}-{count}"
                section = f"{self.name}-s{n // SECTION_SIZE}"
                sent = now()
                try:
                    if n % SECTION_SIZE == 0:
                        version = client.append_sections(collection, [{"id": section, "items": [item]}])
                    else:
                        version = client.append_items(collection, [item], section=section)
                except DiffcastError as error:
                    if error.code == "duplicate_identifier":
                        self.maybe_applied += 1
                        count += 1
                    else:
                        self.refusals[error.code] += 1
                        time.sleep(0.05)
                    continue
                except OSError:
                    self.reconnects += 1
                    try:
                        client.close()
                    except OSError:
                        pass
                    client = None
                    time.sleep(0.05)
                    continue
                self.acknowledged.append((now(), collection, item, sent, version))
                count += 1
                if self.delay:
                    time.sleep(self.delay)
        except Exception as error:  # noqa: BLE001 - reported, never hidden
            self.error = repr(error)
        finally:
            if client is not None:
                client.close()


class _FollowingClient(Client):
    """A client whose follow() does not reconnect once its subscriber is stopping."""

    def __init__(self, socket_path, stopping, **options):
        self._stopping = stopping
        super().__init__(socket_path, **options)

    def _reconnect_patiently(self, seconds):
        if self._stopping.is_set():
            raise ConnectionError("the subscriber stops")
        return super()._reconnect_patiently(seconds)


class Subscriber(threading.Thread):
    """Follows one collection through one daemon with `follow()` and its verified mirror.
    Keeps every version it went through, gaps, version regressions, epoch changes, and where
    it resumed. When its daemon dies it resumes on another that is up, from its mirror."""

    def __init__(self, name, collection, home, daemons, resuming=None):
        super().__init__(daemon=True)
        self.name = name
        self.collection = collection
        self.home = home
        self.daemons = daemons
        self.current = resuming.current if resuming else home
        self.mirror = resuming.mirror if resuming else None
        self.versions = resuming.versions if resuming else []
        self.problems = resuming.problems if resuming else []
        self.resumes = resuming.resumes if resuming else []
        self.snapshots_after_resume = resuming.snapshots_after_resume if resuming else 0
        self._epoch = resuming._epoch if resuming else None
        self.stopping = threading.Event()
        self.finished = threading.Event()
        self.cycle = 0
        self.client = None
        # (time, version) of each event this cycle (reset by each cycle).
        self.arrivals = resuming.arrivals if resuming else []

    def _next_daemon(self, avoid):
        candidates = [self.home] + [d for d in self.daemons if d is not self.home]
        for daemon in candidates:
            if daemon is not avoid and daemon.state == "up":
                return daemon
        return None

    def run(self):
        try:
            self._run()
        except Exception as error:  # noqa: BLE001 - reported, never hidden
            self.problems.append(f"{self.name}: the follower failed: {error!r}")
        finally:
            self.finished.set()

    def _run(self):
        resumed = self.mirror is not None
        while not self.stopping.is_set():
            daemon = self.current
            try:
                client = _FollowingClient(daemon.socket_path, self.stopping, timeout=30)
            except OSError:
                replacement = self._next_daemon(avoid=daemon)
                if replacement is None:
                    time.sleep(0.1)
                else:
                    self.current = replacement
                    resumed = self.mirror is not None
                continue
            self.client = client
            if resumed:
                self.resumes.append((self.cycle, daemon.number, self.mirror.version))
            try:
                # `reconnect_for`: give up on a dead daemon soon and resume elsewhere.
                first = "resumed" if resumed else None
                for event, mirror in client.follow(self.collection, mirror=self.mirror, reconnect_for=0.5):
                    self.mirror = mirror
                    self._record(event, first, daemon)
                    first = None
                    if self.stopping.is_set():
                        break
            except OSError:
                if self.stopping.is_set():
                    break
                replacement = self._next_daemon(avoid=daemon)
                if replacement is not None:
                    self.current = replacement
                resumed = self.mirror is not None
                time.sleep(0.05)
            finally:
                self.client = None
                client.close()

    def stop(self):
        """Ends the follow (its connection is shut; the follower does not reconnect)."""
        self.stopping.set()
        client = self.client
        if client is not None:
            try:
                client._socket.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _record(self, event, first, daemon):
        """`first`: why this is the first event of a follow() (None: in the middle of one)."""
        kind = event["event"]
        held = self.versions[-1] if self.versions else None
        if kind == "changeset":
            version = event["version"]
            if held is not None and event["from"] != held:
                self.problems.append(f"{self.name}: gap: held {held}, changeset from {event['from']} (d{daemon.number})")
        elif kind == "snapshot":
            version = event["version"]
            if held is not None:
                if first == "resumed":
                    self.snapshots_after_resume += 1
                else:
                    self.problems.append(
                        f"{self.name}: a snapshot at {version} while holding {held} on d{daemon.number}, "
                        f"{first or 'in the middle of a subscription'}")
                if version < held:
                    self.problems.append(f"{self.name}: went back from {held} to {version} (d{daemon.number})")
        else:
            self.problems.append(f"{self.name}: unexpected event {kind}")
            return
        if self.versions and self.mirror.epoch != self._epoch:
            self.problems.append(f"{self.name}: the epoch changed from {self._epoch} to {self.mirror.epoch}")
        self._epoch = self.mirror.epoch
        self.arrivals.append((now(), version))
        self.versions.append(version)
        if len(self.versions) > 4096:  # the chain is checked as it grows; keep the tail
            del self.versions[:-1024]


class Sampler(threading.Thread):
    """Samples each daemon's stats every 0.25 s: backbone.log_behind, as (time, lag) per daemon."""

    def __init__(self, daemons, period=0.25):
        super().__init__(daemon=True)
        self.daemons = daemons
        self.period = period
        self.samples = {daemon.number: [] for daemon in daemons}
        self.stopping = threading.Event()

    def run(self):
        clients = {}
        while not self.stopping.wait(self.period):
            for daemon in self.daemons:
                if daemon.state != "up":
                    clients.pop(daemon.number, None)
                    continue
                try:
                    client = clients.get(daemon.number)
                    if client is None:
                        client = clients[daemon.number] = Client(daemon.socket_path, timeout=1)
                    behind = client.stats()["backbone"]["log_behind"]
                except (OSError, DiffcastError, KeyError, ValueError):
                    stale = clients.pop(daemon.number, None)
                    if stale is not None:
                        try:
                            stale.close()
                        except OSError:
                            pass
                    continue
                self.samples[daemon.number].append((now(), behind))
        for client in clients.values():
            client.close()


def stalls(samples, since=None, until=None):
    """Runs of log_behind > 0 in consecutive samples: (start, duration, largest lag). A run
    lasts from its first positive sample to the first zero sample after it."""
    runs = []
    start = largest = None
    last = None
    for at, behind in samples:
        if since is not None and at < since:
            continue
        if until is not None and at > until:
            break
        if behind > 0:
            if start is None:
                start, largest = at, behind
            largest = max(largest, behind)
        elif start is not None:
            runs.append((start, at - start, largest))
            start = None
        last = at
    if start is not None and last is not None:
        runs.append((start, last - start, largest))
    return runs


def delivery_spread(subscribers, began):
    """How much later the last subscriber of a collection reached a version than the first
    did: (the largest delay, that subscriber, the version, when, after `began`), or None. A
    subscriber reaches V with its first event at V or later; a resumed one is late by its
    time without a daemon."""
    worst = None
    for collection in COLLECTIONS:
        followers = [s for s in subscribers if s.collection == collection and s.arrivals]
        if len(followers) < 2:
            continue
        versions = sorted({version for s in followers for _, version in s.arrivals})
        reached = []
        for s in followers:
            times, highest = [], None
            pointer = 0
            arrivals = sorted(s.arrivals, key=lambda a: a[0])
            for version in versions:
                while pointer < len(arrivals) and (highest is None or highest < version):
                    at, highest = arrivals[pointer][0], max(highest or 0, arrivals[pointer][1])
                    pointer += 1
                times.append(at if highest is not None and highest >= version else None)
            reached.append((s, times))
        for index, version in enumerate(versions):
            known = [(times[index], s) for s, times in reached if times[index] is not None]
            if len(known) < 2:
                continue
            first = min(t for t, _ in known)
            last_at, last = max(known, key=lambda k: k[0])
            if worst is None or last_at - first > worst[0]:
                worst = (last_at - first, last.name, version, last_at - began)
    return worst


def wait_until(condition, timeout, period=0.05):
    deadline = now() + timeout
    while now() < deadline:
        if condition():
            return True
        time.sleep(period)
    return condition()


def get(daemon, collection, timeout=10):
    with Client(daemon.socket_path, timeout=timeout) as client:
        return client.get(collection)


def identity(answer):
    return (answer["version"], answer["epoch"], answer["digest"])


def item_ids(answer):
    return [item if isinstance(item, str) else item["id"] for section in answer["sections"] for item in section["items"]]


class Soak:
    def __init__(self, arguments):
        self.arguments = arguments
        self.seed = arguments.seed if arguments.seed is not None else random.randrange(1 << 32)
        self.random = random.Random(self.seed)
        self.directory = tempfile.mkdtemp(prefix="diffcast-soak-")
        self.cluster = None
        self.nats = None
        self.daemons = []
        self.writers = []
        self.subscribers = []
        self.sampler = None
        self.results = []
        self.acknowledged = {collection: {} for collection in COLLECTIONS}  # item -> (cycle, writer)
        self.crashes = []
        self.failed = False

    # Setup and teardown

    def start(self):
        log(f"soak: seed {self.seed}, {self.arguments.cycles} cycles, binary {diffcastd()}, folder {self.directory}")
        self.cluster = Cluster()
        self.nats = NatsServers(self.cluster)
        log(f"soak: nats-servers on {self.cluster.urls} ({self.cluster.directory})")
        for number, owner in enumerate((True, True, False)):
            daemon = SoakDaemon(number, self.cluster, os.path.join(self.directory, f"d{number}"), owner,
                                self.arguments.lease_ms, self.arguments.snapshot_every)
            self.daemons.append(daemon.start())
        # d0 makes soak-a and d1 soak-b: each owner-capable daemon owns one collection.
        for daemon, collection in zip(self.daemons, COLLECTIONS):
            with daemon.client(timeout=30) as client:
                client.append_sections(collection, [{"id": "head", "items": []}])
        def version(daemon, collection):
            try:
                return get(daemon, collection)["version"]
            except (OSError, DiffcastError):
                return -1

        for collection in COLLECTIONS:
            if not wait_until(lambda: all(version(d, collection) >= 1 for d in self.daemons), 30):
                raise RuntimeError(f"{collection} did not reach every daemon")
        for daemon in self.daemons:
            for collection in COLLECTIONS:
                subscriber = Subscriber(f"sub-d{daemon.number}-{collection}", collection, daemon, self.daemons)
                subscriber.start()
                self.subscribers.append(subscriber)
        self.sampler = Sampler(self.daemons)
        self.sampler.start()

    def stop_everything(self):
        for writer in self.writers:
            writer.stopping.set()
        for subscriber in self.subscribers:
            subscriber.stop()
        if self.sampler:
            self.sampler.stopping.set()
        for daemon in self.daemons:
            try:
                daemon.shutdown()
            except Exception as error:  # noqa: BLE001
                log(f"soak: stopping d{daemon.number}: {error!r}")
        keep = self.failed or self.arguments.keep
        if self.nats:
            self.nats.close(keep_logs_in=self.directory if keep else None)
        for thread in self.writers + self.subscribers + ([self.sampler] if self.sampler else []):
            thread.join(timeout=5)
        if keep:
            log(f"soak: logs kept in {self.directory} (d*/daemon.log, nats-n*.log)")
        else:
            shutil.rmtree(self.directory, ignore_errors=True)

    # One cycle

    def start_writers(self, cycle):
        self.writers = [
            Writer(f"w1c{cycle}", self.daemons[1], self.daemons, self.arguments.write_delay),
            Writer(f"w2c{cycle}", self.daemons[2], self.daemons, self.arguments.write_delay),
        ]
        for writer in self.writers:
            writer.start()

    def stop_writers(self):
        for writer in self.writers:
            writer.stopping.set()
        for writer in self.writers:
            writer.join(timeout=60)
            if writer.is_alive():
                raise RuntimeError(f"{writer.name} did not stop within 60 s")

    def owners(self):
        """Which daemon holds which collection's lease, as the daemons' stats say (a count only)."""
        held = {}
        for daemon in self.daemons:
            if daemon.state != "up":
                continue
            try:
                with Client(daemon.socket_path, timeout=2) as client:
                    held[daemon.number] = client.stats()["backbone"]["owned_collections"]
            except (OSError, DiffcastError):
                pass
        return held

    def inject(self, fault):
        """Injects `fault`; returns (its description, when it began, when it was undone)."""
        rng = self.random
        if fault == "daemon-kill":
            daemon = rng.choice(self.daemons)
            pause = rng.uniform(0.5, 2.0)
            began = now()
            daemon.kill()
            time.sleep(pause)
            undone = now()
            daemon.start()
            return f"kill -9 d{daemon.number}, restarted after {pause:.1f} s (serving {now() - undone:.1f} s later)", began, undone
        if fault == "daemon-stop":
            daemon = rng.choice(self.daemons)
            pause = rng.uniform(2.0, 4.0)
            began = now()
            daemon.pause()
            time.sleep(pause)
            undone = now()
            daemon.resume()
            return f"SIGSTOP d{daemon.number} for {pause:.1f} s", began, undone
        if fault in ("nats-kill", "leader-kill"):
            if fault == "leader-kill":
                server = self.cluster.stream_leader()
            else:
                server = rng.randrange(3)
            pause = rng.uniform(1.0, 3.0)
            began = now()
            self.nats.kill(server)
            time.sleep(pause)
            undone = now()
            self.nats.restart(server)
            return f"kill -9 nats n{server}{' (stream leader)' if fault == 'leader-kill' else ''}, restarted after {pause:.1f} s", began, undone
        if fault == "nats-stop":
            server = rng.randrange(3)
            pause = rng.uniform(2.0, 5.0)
            began = now()
            self.nats.pause(server)
            time.sleep(pause)
            undone = now()
            self.nats.resume(server)
            return f"SIGSTOP nats n{server} for {pause:.1f} s", began, undone
        raise ValueError(fault)

    def converged(self):
        """(True, identities) when every daemon that is up holds each collection alike."""
        identities = {}
        for collection in COLLECTIONS:
            seen = {}
            for daemon in self.daemons:
                if daemon.state != "up":
                    continue
                try:
                    seen[daemon.number] = identity(get(daemon, collection, timeout=5))
                except (OSError, DiffcastError) as error:
                    seen[daemon.number] = ("error", str(error))
            identities[collection] = seen
        agree = all(len(set(seen.values())) == 1 and len(seen) == len(self.daemons) for seen in identities.values())
        return agree, identities

    def reap(self, result):
        """A daemon that died by itself (not killed by a fault) is a problem: its crash report
        is kept, and it is started again so that the soak goes on."""
        for daemon in self.daemons:
            if daemon.state != "up" or daemon.process is None or daemon.process.poll() is None:
                continue
            daemon.state = "dead"
            code = daemon.process.returncode
            text = daemon.log_since(daemon.started_at_offset)
            lines = text.splitlines()
            crash = [line for line in lines if "Program crashed" in line or "Fatal error" in line]
            before = [line for line in lines if re.match(r"^\d{4}-\d\d-\d\dT", line)][-3:]
            self.crashes.append((result["cycle"], daemon.number, code, crash[:2], before))
            result["problems"].append(
                f"CRASH: d{daemon.number} exited by itself with {code}: {' '.join(crash[:2]) or '(no crash report)'}; "
                f"last log lines: {before}")
            daemon.start()

    def cycle(self, cycle):
        arguments = self.arguments
        result = {"cycle": cycle, "lost": 0, "converged": False, "problems": []}
        self.reap(result)
        offsets = [daemon.log_size() for daemon in self.daemons]
        cycle_began = now()
        for subscriber in self.subscribers:
            subscriber.cycle = cycle
            subscriber.arrivals = []
        self.start_writers(cycle)
        if not wait_until(lambda: all(len(w.acknowledged) >= 20 for w in self.writers), 60):
            result["problems"].append("writes did not flow before the fault (20 each within 60 s)")
        time.sleep(self.random.uniform(0.5, 1.5))
        fault = self.random.choice(FAULTS)
        owners_before = self.owners()
        description, began, undone = self.inject(fault)
        self.reap(result)
        result["fault"] = fault
        result["description"] = description
        result["began"] = began
        # Writers go on until each had a write acknowledged that it sent after the fault was
        # undone, and for at least --after seconds after that.
        wait_until(lambda: all(any(sent > undone for _, _, _, sent, _ in w.acknowledged) for w in self.writers), 60)
        time.sleep(arguments.after)
        stopped = now()
        self.stop_writers()
        after_fault = sorted(at for w in self.writers for at, _, _, sent, _ in w.acknowledged if sent >= began)
        result["failover"] = after_fault[0] - began if after_fault else None
        firsts = [min((at for at, _, _, sent, _ in w.acknowledged if sent >= began), default=None) for w in self.writers]
        result["failover_all"] = max(f - began for f in firsts) if all(f is not None for f in firsts) else None
        acknowledgements = sorted(at for w in self.writers for at, *_ in w.acknowledged)
        window = [began] + [at for at in acknowledgements if at >= began] + [stopped]
        result["pause"] = max(b - a for a, b in zip(window, window[1:]))
        result["acks"] = sum(len(w.acknowledged) for w in self.writers)
        result["refusals"] = sum((w.refusals for w in self.writers), collections.Counter())
        result["reconnects"] = sum(w.reconnects for w in self.writers)
        result["maybe"] = sum(w.maybe_applied for w in self.writers)
        for writer in self.writers:
            if writer.error:
                result["problems"].append(f"{writer.name} failed: {writer.error}")
            for _, collection, item, _, _ in writer.acknowledged:
                self.acknowledged[collection][item] = cycle

        # Convergence (bounded).
        agree, identities = False, {}
        deadline = now() + arguments.converge_timeout
        while now() < deadline:
            self.reap(result)
            agree, identities = self.converged()
            if agree:
                break
            time.sleep(0.25)
        result["converge"] = now() - stopped
        result["converged"] = agree
        result["identities"] = identities
        if not agree:
            result["problems"].append("NOT CONVERGED: " f"within {arguments.converge_timeout} s: {identities}")

        # Every acknowledged write, ever, held exactly once.
        finals = {}
        for collection in COLLECTIONS:
            reference = next(d for d in self.daemons if d.state == "up")
            answer = get(reference, collection, timeout=30)
            finals[collection] = answer
            held = item_ids(answer)
            counts = collections.Counter(held)
            twice = [item for item, count in counts.items() if count > 1]
            missing = [item for item in self.acknowledged[collection] if item not in counts]
            if twice:
                result["problems"].append(f"{collection}: held twice: {twice[:5]}")
            if missing:
                result["lost"] += len(missing)
                result["problems"].append(
                    f"LOST: {collection}: {len(missing)} acknowledged writes lost: {missing[:5]} "
                    f"(acknowledged in cycles {sorted({self.acknowledged[collection][m] for m in missing})})")
            result[f"items-{collection}"] = len(held)
        result["versions"] = {c: finals[c]["version"] for c in COLLECTIONS}

        # Subscribers: at the final version, digest equal, chain gapless, mirror verified.
        def caught_up(subscriber):
            final = finals[subscriber.collection]
            return bool(subscriber.versions) and subscriber.versions[-1] == final["version"]

        if not wait_until(lambda: all(caught_up(s) for s in self.subscribers), arguments.converge_timeout, 0.1):
            behind = [(s.name, s.versions[-1] if s.versions else None, s.current.number) for s in self.subscribers if not caught_up(s)]
            result["problems"].append(f"subscribers not at the final version: {behind}")
        for subscriber in self.subscribers:
            final = finals[subscriber.collection]
            mirror = subscriber.mirror
            if caught_up(subscriber) and (mirror.digest(), mirror.epoch) != (final["digest"], final["epoch"]):
                result["problems"].append(f"{subscriber.name}: mirror digest {mirror.digest()} != {final['digest']}")
            if mirror is not None and mirror.divergences:
                result["problems"].append(f"{subscriber.name}: divergences {mirror.divergences[:3]}")
                mirror.divergences.clear()
            if subscriber.problems:
                result["problems"].extend(subscriber.problems)
                subscriber.problems.clear()
        result["resumes"] = sum(1 for s in self.subscribers for r in s.resumes if r[0] == cycle)
        result["spread"] = delivery_spread(self.subscribers, began)

        # Subscribers away from home go home, from their mirror (another resume).
        for index, subscriber in enumerate(self.subscribers):
            if subscriber.current is not subscriber.home and subscriber.home.state == "up":
                subscriber.stop()
                if not subscriber.finished.wait(10):
                    result["problems"].append(f"{subscriber.name} did not stop within 10 s")
                    continue
                moved = Subscriber(subscriber.name, subscriber.collection, subscriber.home, self.daemons, resuming=subscriber)
                moved.current = subscriber.home
                moved.cycle = cycle
                moved.start()
                self.subscribers[index] = moved

        # The daemons' logs and sampled stats for this cycle.
        texts = [daemon.log_since(offset) for daemon, offset in zip(self.daemons, offsets)]
        anew = [re.findall(r"following it anew.*", text) for text in texts]
        result["anew"] = sum(len(found) for found in anew)
        result["anew_lines"] = [f"d{n}: {line}" for n, found in enumerate(anew) for line in found]
        result["takeovers"] = sum(text.count("took the lease") for text in texts)
        result["lost_leases"] = sum(text.count("lost the lease") for text in texts)
        result["fenced"] = sum(text.count("another daemon wrote the log") for text in texts)
        result["append_retries"] = sum(text.count("retrying an append") for text in texts)
        result["skipped"] = sum(text.count("a message that cannot be applied; skipped") for text in texts)
        result["no_snapshot"] = sum(text.count("has no snapshot of it") for text in texts)
        result["errors"] = [f"d{n}: {line}" for n, text in enumerate(texts) for line in text.splitlines()
                            if re.match(r"\S+ (error|critical) ", line)]
        result["start_failures"] = [f"d{d.number}: exit {code}: {line}" for d in self.daemons
                                    for at, code, line in d.start_failures if at >= cycle_began]
        runs = [(daemon.number, run) for daemon in self.daemons
                for run in stalls(self.sampler.samples[daemon.number], since=cycle_began)]
        result["stalls"] = runs
        result["owners_before"] = owners_before
        result["owners_after"] = self.owners()
        return result

    def report(self, r):
        def seconds(value):
            return "-" if value is None else f"{value:.2f}s"

        def spread(value):
            if value is None:
                return "-"
            delay, name, version, at = value
            return f"{delay:.2f}s ({name} reached version {version} last, {at:.2f}s after the fault)"

        long_stalls = [run for _, run in r["stalls"] if run[1] >= 1.5]
        log(
            f"cycle {r['cycle']:>3} {r['fault']:<11} {r['description']}\n"
            f"          failover {seconds(r['failover'])} (every writer {seconds(r['failover_all'])}), "
            f"longest pause {seconds(r['pause'])}, converged {'yes' if r['converged'] else 'NO'} in {seconds(r['converge'])}; "
            f"versions {r['versions']}; acks {r['acks']}, refusals {dict(r['refusals'])}, "
            f"writer reconnects {r['reconnects']}, maybe-applied {r['maybe']}\n"
            f"          delivery spread {spread(r['spread'])}\n"
            f"          leases owned before {r['owners_before']} after {r['owners_after']}, takeovers {r['takeovers']}, "
            f"lost leases {r['lost_leases']}, fenced {r['fenced']}, append retries {r['append_retries']}, "
            f"log messages skipped {r['skipped']} (snapshot unreadable {r['no_snapshot']}); subscriber resumes {r['resumes']}; "
            f"'following it anew' {r['anew']}; stalls (log_behind>0) {len(r['stalls'])}, "
            f">=1.5 s {len(long_stalls)}, longest {seconds(max((run[1] for _, run in r['stalls']), default=None))}, "
            f"largest lag {max((run[2] for _, run in r['stalls']), default=0)}"
        )
        for line in r["anew_lines"]:
            log(f"          {line}")
        for number, (start, duration, largest) in r["stalls"]:
            if duration >= 1.5:
                log(f"          stall: d{number} log_behind > 0 for {duration:.2f}s from {start - r['began']:+.2f}s "
                    f"(relative to the fault), up to {largest} messages")
        for line in r["start_failures"]:
            log(f"          a start failed (tried again): {line}")
        for line in r["errors"][:5]:
            log(f"          log: {line}")
        for problem in r["problems"]:
            log(f"          PROBLEM: {problem}")

    def summary(self):
        results = self.results
        log("\nsummary" + f" (seed {self.seed})")
        header = f"{'fault':<12}{'cycles':>7}{'failover p50':>14}{'max':>8}{'every writer max':>18}{'pause max':>11}{'converge max':>14}{'spread max':>12}{'lost':>6}{'not conv.':>10}{'anew':>6}"
        log(header)
        log("-" * len(header))
        for fault in FAULTS + ("all",):
            rows = [r for r in results if fault in ("all", r["fault"])]
            if not rows:
                continue
            failovers = [r["failover"] for r in rows if r["failover"] is not None]
            every = [r["failover_all"] for r in rows if r["failover_all"] is not None]
            log(
                f"{fault:<12}{len(rows):>7}"
                f"{(f'{statistics.median(failovers):.2f}s' if failovers else '-'):>14}"
                f"{(f'{max(failovers):.2f}s' if failovers else '-'):>8}"
                f"{(f'{max(every):.2f}s' if every else '-'):>18}"
                f"{max(r['pause'] for r in rows):>10.2f}s"
                f"{max(r['converge'] for r in rows):>13.2f}s"
                f"{max((r['spread'][0] for r in rows if r['spread']), default=0):>11.2f}s"
                f"{sum(r['lost'] for r in rows):>6}"
                f"{sum(1 for r in rows if not r['converged']):>10}"
                f"{sum(r['anew'] for r in rows):>6}"
            )
        lost = sum(r["lost"] for r in results)
        unconverged = sum(1 for r in results if not r["converged"])
        problems = sum(len(r["problems"]) for r in results)
        others = [p for r in results for p in r["problems"] if not p.startswith(("LOST", "NOT CONVERGED", "CRASH"))]
        all_stalls = [run for r in results for _, run in r["stalls"]]
        long_stalls = [run for run in all_stalls if run[1] >= 1.5]
        resumes = sum(r["resumes"] for r in results)
        snapshots = sum(s.snapshots_after_resume for s in self.subscribers)
        log("")
        log(f"lost acknowledged writes: {lost} (must be 0)")
        log(f"non-converged cycles: {unconverged} (must be 0)")
        log(f"daemons that died by themselves: {len(self.crashes)} (must be 0)"
            + "".join(f"\n  cycle {c}: d{n} exit {code}: {' '.join(crash)}" for c, n, code, crash, _ in self.crashes))
        log(f"other problems (gaps, divergences, subscribers behind, duplicates, writers): {len(others)} (must be 0)")
        log(f"acknowledged writes: {sum(len(v) for v in self.acknowledged.values())}; subscriber resumes: {resumes} "
            f"({snapshots} began with a snapshot)")
        log(f"'following it anew': {sum(r['anew'] for r in results)} times in {sum(1 for r in results if r['anew'])} cycles")
        log(f"daemon starts that failed and were tried again: {sum(len(r['start_failures']) for r in results)}")
        log(f"log messages skipped by a daemon: {sum(r['skipped'] for r in results)} "
            f"('has no snapshot of it': {sum(r['no_snapshot'] for r in results)})")
        durations = sorted(run[1] for run in all_stalls)
        if durations:
            log(f"stalls (log_behind > 0 in consecutive 0.25 s samples): {len(durations)}; "
                f"p50 {statistics.median(durations):.2f}s, max {durations[-1]:.2f}s; >=1.5 s: {len(long_stalls)}; "
                f"largest lag {max(run[2] for run in all_stalls)} messages")
        else:
            log("stalls (log_behind > 0 in consecutive 0.25 s samples): none")
        return lost == 0 and unconverged == 0 and problems == 0 and not self.crashes

    def run(self):
        deadline = now() + self.arguments.max_minutes * 60
        ok = False
        try:
            self.start()
            for cycle in range(1, self.arguments.cycles + 1):
                if now() > deadline:
                    log(f"soak: --max-minutes {self.arguments.max_minutes} reached before cycle {cycle}")
                    self.failed = True
                    break
                result = self.cycle(cycle)
                self.results.append(result)
                self.report(result)
            ok = self.summary() if self.results else False
            self.failed = self.failed or not ok
        except BaseException:
            self.failed = True
            raise
        finally:
            self.stop_everything()
        return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument("--seed", type=int, default=None, help="replays a run's draw of faults")
    parser.add_argument("--lease-ms", type=int, default=1500, help="the daemons' --backbone-lease-ms")
    parser.add_argument("--snapshot-every", type=int, default=1000, help="the daemons' --backbone-snapshot-every")
    parser.add_argument("--after", type=float, default=2.0, help="seconds of writing after the fault is undone")
    parser.add_argument("--write-delay", type=float, default=0.002, help="seconds each writer sleeps between writes")
    parser.add_argument("--converge-timeout", type=float, default=60.0)
    parser.add_argument("--max-minutes", type=float, default=None, help="the whole run's bound (default 3 per cycle + 5)")
    parser.add_argument("--keep", action="store_true", help="keep the run's folder (logs) even when all is well")
    arguments = parser.parse_args()
    if arguments.max_minutes is None:
        arguments.max_minutes = 3 * arguments.cycles + 5
    if not os.path.exists(diffcastd()):
        sys.exit(f"soak: no daemon binary at {diffcastd()} (swift build, or set DIFFCASTD)")

    def terminate(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, terminate)
    sys.exit(0 if Soak(arguments).run() else 1)


if __name__ == "__main__":
    main()

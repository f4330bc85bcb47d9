"""``follow()`` across daemon restarts: it reconnects, resumes with ``since``/``epoch`` from the
version it holds, and its chain of versions goes on without a gap."""

import signal
import threading
import time

import pytest

from diffcast import CannotConnect
from diffcast.testing import Daemon

from conftest import daemon_binary


@pytest.fixture
def durable(tmp_path):
    """A daemon whose collections (epoch, version, history) survive a restart."""
    with Daemon(daemon_binary(), ["--state-dir", str(tmp_path / "state")]) as running:
        yield running


def assert_chained(events):
    """Every changeset starts where the previous event left the mirror."""
    for previous, event in zip(events, events[1:]):
        if event["event"] == "changeset":
            assert event["from"] == previous["version"], events


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "kill -9"])
def test_follow_resumes_with_one_catch_up_changeset_after_a_restart(durable, sig):
    writer = durable.client()
    writer.apply("c", [{"id": "s", "items": ["a", "b"]}])
    follow = durable.client().follow("c", timeout=5, reconnect_for=10)
    event, mirror = next(follow)
    assert event["event"] == "snapshot" and mirror.version == 1
    durable.restart(sig)
    writer = durable.client()
    writer.update_items("c", {"a": {"n": 1}})
    writer.append_items("c", ["z"])
    event, mirror = next(follow)  # the follower finds the connection gone, reconnects, subscribes since 1
    assert (event["event"], event["from"], event["version"]) == ("changeset", 1, 3)
    assert mirror.digest() == writer.get("c")["digest"] and mirror.divergences == []


def test_a_follower_goes_on_through_restarts_while_it_waits(durable):
    """The follower runs on its own thread while the daemon is stopped (SIGTERM, then kill -9)
    for longer than its first reconnection attempts, and writes go on around the restarts."""
    writer = durable.client()
    writer.apply("c", [{"id": "s", "items": ["a"]}])
    events, mirrors = [], []

    def run():
        for event, mirror in durable.client().follow("c", timeout=2, reconnect_for=10):
            events.append(event)
            mirrors.append(mirror)

    follower = threading.Thread(target=run)
    follower.start()
    version = 1
    for cycle, sig in enumerate([signal.SIGTERM, signal.SIGKILL, signal.SIGKILL]):
        for n in range(5):
            version = writer.append_items("c", [{"id": "%d.%d" % (cycle, n), "data": {"n": n}}])
        durable.wait_for(lambda: events and events[-1]["version"] == version, what="the follower to catch up")
        durable.stop(sig)
        time.sleep(0.4)  # the follower fails to reconnect a few times
        durable.start()
        writer = durable.client()
    version = writer.update_items("c", {"0.0": "last"})
    follower.join(timeout=20)
    assert not follower.is_alive()
    state = writer.get("c")
    assert events[-1]["version"] == state["version"] == version
    assert [e["event"] for e in events].count("snapshot") == 1
    assert_chained(events)
    assert mirrors[-1].digest() == state["digest"] and mirrors[-1].divergences == []


def test_a_restart_that_lost_history_brings_a_snapshot(daemon):
    """Without a state directory the restarted daemon has a new epoch: the follower gets the
    new state whole."""
    writer = daemon.client()
    writer.apply("c", [{"id": "s", "items": ["a", "b"]}])
    follow = daemon.client().follow("c", timeout=5, reconnect_for=10)
    _, mirror = next(follow)
    epoch = mirror.epoch
    daemon.restart(signal.SIGKILL)
    writer = daemon.client()
    writer.apply("c", [{"id": "t", "items": ["x"]}])
    event, mirror = next(follow)
    assert event["event"] == "snapshot" and mirror.epoch != epoch
    assert mirror.items() == [("t", [("x", None)])] and mirror.digest() == writer.get("c")["digest"]


def test_a_follower_gives_up_after_reconnect_for(daemon):
    follow = daemon.client().follow("c", timeout=5, reconnect_for=0.5)
    next(follow)
    daemon.stop(signal.SIGKILL)
    started = time.monotonic()
    with pytest.raises(CannotConnect) as error:
        next(follow)
    # It retried for its half second, and then gave up (a loaded machine may take a while more).
    assert 0.4 < time.monotonic() - started < 15
    assert error.value.endpoint == daemon.socket_path


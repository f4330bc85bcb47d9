"""Daemons sharing collections through NATS JetStream, tried as an operator meets them: a
3-node nats-server cluster and 3 daemons (two that may own collections, one that never does),
writers on two daemons, subscribers on all three, and the failures that matter: the owner
daemon killed, the stream's leader killed, an owner stopped past its lease."""

import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import pytest

from cluster import BackboneDaemon, Cluster, Subscriber, Writer, state, wait_until

CHECKER = pathlib.Path(os.environ.get("CHECKER", pathlib.Path(__file__).resolve().parents[3] / "shared/conformance/check.py"))


@pytest.fixture
def cluster():
    running = Cluster()
    yield running
    running.close()


@pytest.fixture
def daemons(cluster):
    started = [BackboneDaemon(cluster), BackboneDaemon(cluster), BackboneDaemon(cluster, owner=False)]
    for daemon in started:
        daemon.start()
    yield started
    for daemon in started:
        daemon.stop(signal.SIGKILL)


def converged(daemons, collection):
    """Every daemon holds the same version with the same digest and items."""
    answers = [state(daemon, collection) for daemon in daemons]
    first = answers[0]
    return all(
        (answer["version"], answer["digest"], answer["epoch"]) == (first["version"], first["digest"], first["epoch"])
        for answer in answers
    )


def holds(daemon, collection):
    """Whether the daemon has applied the collection's first version (until then `get` answers
    unknown_collection)."""
    with daemon.client() as client:
        return any(row["name"] == collection and row["version"] >= 1 for row in client.list())


def backbone_stats(daemon):
    with daemon.client() as client:
        return client.stats()["backbone"]


def items(answer):
    return [item if isinstance(item, str) else item["id"] for section in answer["sections"] for item in section["items"]]


def check_run(survivors, writers, subscribers, collection):
    """What every failure must leave: all acknowledged writes present, once; the daemons agree
    on version and digest; every subscriber's chain is gapless and its mirror verified."""
    for writer in writers:
        writer.stopping.set()
    for writer in writers:
        writer.join(timeout=60)
    wait_until(lambda: converged(survivors, collection), what="the daemons to converge")
    # A daemon that follows the log says how far behind the stream it is: nothing, once converged.
    wait_until(lambda: all(backbone_stats(daemon)["log_behind"] == 0 for daemon in survivors), what="log_behind 0")
    final = state(survivors[0], collection)
    held = items(final)
    assert len(held) == len(set(held)), "an item is held twice"
    for writer in writers:
        missing = [item for _, item, _ in writer.acknowledged if item not in held]
        assert not missing, f"acknowledged writes lost: {missing[:5]}"
        assert writer.acknowledged, f"{writer.name} had no write acknowledged"
    for subscriber in subscribers:
        wait_until(lambda: subscriber.versions and subscriber.versions[-1] == final["version"], what="subscribers")
        assert not subscriber.gaps, f"a subscriber's chain has gaps: {subscriber.gaps}"
        assert not subscriber.mirror.divergences, subscriber.mirror.divergences
        assert subscriber.mirror.digest() == final["digest"]
    return final


def start_load(daemons, collection):
    with daemons[0].client() as client:
        client.append_sections(collection, [{"id": "s", "items": []}])
    subscribers = [Subscriber(daemon, collection) for daemon in daemons]
    writers = [Writer(daemons[1], collection, "w1"), Writer(daemons[2], collection, "w2")]
    for thread in subscribers + writers:
        thread.start()
    wait_until(lambda: all(len(writer.acknowledged) > 20 for writer in writers), what="writes to flow")
    return writers, subscribers


@pytest.mark.skipif(not CHECKER.exists(), reason="../shared/conformance/check.py is not there")
def test_the_contract_holds_on_a_daemon_that_owns_nothing(daemons):
    # Every scenario of the checker but `slow`: a stalled subscriber is served by the same
    # fan-out whatever applied the version (FanOutTests, and check.py against one daemon in
    # .ci/run), and its 6 MB through the Python mirrors is most of the checker's time.
    scenarios = [name for name in re.findall(r"^    def s_(\w+)\(", CHECKER.read_text(), re.MULTILINE) if name != "slow"]
    assert len(scenarios) >= 10, scenarios
    result = subprocess.run(
        [sys.executable, str(CHECKER), "--socket", daemons[2].socket_path, "--contract", "3",
         *[argument for name in scenarios for argument in ("-k", name)]],
        capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0 and f"{len(scenarios)} passed, 0 failed" in result.stdout, result.stdout[-3000:]


def test_every_drop_reaches_every_daemon(daemons):
    """A drop is logged like any write: each of several drops (by the same owner, within the
    log's duplicate window) reaches every daemon and its subscribers. Once, every drop after a
    daemon's first took the ID of the one before, was discarded by JetStream as a duplicate, and
    the collection lived on everywhere but on its owner."""
    follower = daemons[2]
    with follower.client() as client:
        for round in range(3):
            collection = f"dropped-{round}"
            client.append_sections(collection, [{"id": "s", "items": ["a", "b"]}])
            wait_until(lambda: all(holds(daemon, collection) for daemon in daemons), what=f"{collection} everywhere")
            with follower.client() as subscriber:
                subscriber.subscribe(collection)
                client.drop(collection)
                for event in subscriber.events(timeout=10):
                    if event["event"] != "snapshot":
                        assert event["event"] == "dropped", event
                        break
                else:
                    raise AssertionError(f"{collection}: no dropped event on the daemon that asked for the drop")
            wait_until(lambda: not any(holds(daemon, collection) for daemon in daemons), what=f"{collection} dropped everywhere")


def test_killing_the_owner_loses_no_acknowledged_write(cluster, daemons):
    collection = "owner-killed"
    writers, subscribers = start_load(daemons, collection)
    owner = daemons[0]
    killed = time.monotonic()
    owner.kill()
    wait_until(
        lambda: all(any(sent > killed for _, _, sent in writer.acknowledged) for writer in writers),
        timeout=30, what="writes after the owner died",
    )
    failover = min(at for writer in writers for at, _, sent in writer.acknowledged if sent > killed) - killed
    # The owner's subscriber lost its connection; it resumes on another daemon from its version
    # (versions and epochs are the same everywhere), with one changeset and no gap.
    wait_until(lambda: subscribers[0].ended is not None, what="the dead owner's subscriber to notice")
    moved = subscribers[0].resumed_on(daemons[2])
    moved.start()
    time.sleep(1)
    final = check_run(daemons[1:], writers, subscribers[1:] + [moved], collection)
    assert moved.versions[: len(subscribers[0].versions)] == subscribers[0].versions
    print(f"owner killed: first acknowledged write after {failover:.2f} s; final version {final['version']}")
    # The restarted daemon catches up from the shared log and serves the same state.
    owner.start()
    assert converged(daemons, collection)


def test_killing_the_stream_leader_loses_no_acknowledged_write(cluster, daemons):
    collection = "leader-killed"
    writers, subscribers = start_load(daemons, collection)
    leader = cluster.stream_leader()
    killed = time.monotonic()
    cluster.kill(leader)
    wait_until(
        lambda: all(any(sent > killed for _, _, sent in writer.acknowledged) for writer in writers),
        timeout=60, what="writes after the stream leader died",
    )
    time.sleep(1)
    final = check_run(daemons, writers, subscribers, collection)
    print(f"stream leader n{leader} killed; final version {final['version']}")


def test_an_owner_stopped_past_its_lease_acknowledges_nothing_more_itself(cluster, daemons):
    collection = "stopped-owner"
    old_owner = daemons[0]
    with old_owner.client() as client:
        client.append_sections(collection, [{"id": "s", "items": ["before"]}])
    # The subscriber's daemon must hold the collection before its owner stops: a subscribe that
    # arrives earlier is forwarded to the owner (which made it), and the stopped one answers not.
    wait_until(lambda: holds(daemons[1], collection), what="the collection to reach daemon 1")
    subscriber = Subscriber(daemons[1], collection)
    subscriber.start()
    wait_until(lambda: subscriber.versions, what="the subscriber's snapshot")
    old_owner.process.send_signal(signal.SIGSTOP)
    time.sleep(2.5)  # past its 1.5 s lease
    with daemons[1].client(timeout=30) as client:
        deadline = time.monotonic() + 20
        while True:
            try:
                client.append_items(collection, ["while-stopped"])
                break
            except Exception:
                assert time.monotonic() < deadline, "no daemon took over"
                time.sleep(0.1)
    takeovers_before = old_owner.log().count("took the lease")
    old_owner.process.send_signal(signal.SIGCONT)
    with old_owner.client(timeout=30) as client:
        for n in range(20):
            client.append_items(collection, [f"after-{n}"])
    assert old_owner.log().count("took the lease") == takeovers_before, "the old owner wrote the log itself"
    with old_owner.client() as client:
        placed = client.stats()["backbone"]
    assert placed["owned_collections"] == 0 and placed["writes_forwarded"] == 20, placed
    with daemons[1].client() as client:
        assert client.stats()["backbone"]["owned_collections"] == 1
    wait_until(lambda: converged(daemons, collection), what="the daemons to converge")
    final = state(daemons[1], collection)
    assert items(final) == ["before", "while-stopped"] + [f"after-{n}" for n in range(20)]
    wait_until(lambda: subscriber.versions and subscriber.versions[-1] == final["version"], what="the subscriber")
    assert not subscriber.gaps and not subscriber.mirror.divergences


def test_an_owner_stopped_cleanly_hands_its_collections_over_at_once(cluster):
    # A lease of a minute: a daemon that kept it on a clean stop would leave the collection
    # unwritable for that long; one that lets it go is replaced at the next write.
    old_owner, heir = BackboneDaemon(cluster, lease_ms=60_000), BackboneDaemon(cluster, lease_ms=60_000)
    old_owner.start()
    heir.start()
    try:
        collection = "handed-over"
        with old_owner.client() as client:
            client.append_sections(collection, [{"id": "s", "items": ["before"]}])
        wait_until(lambda: holds(heir, collection), what="the collection to reach the heir")
        assert backbone_stats(old_owner)["owned_collections"] == 1
        assert old_owner.stop(signal.SIGTERM) == 0
        stopped = time.monotonic()
        with heir.client(timeout=30) as client:
            while True:
                try:
                    client.append_items(collection, ["after"])
                    break
                except Exception:
                    assert time.monotonic() - stopped < 20, "the stopped owner kept its lease"
                    time.sleep(0.1)
        assert time.monotonic() - stopped < 20
        assert backbone_stats(heir)["owned_collections"] == 1
        assert items(state(heir, collection)) == ["before", "after"]
    finally:
        for daemon in (old_owner, heir):
            daemon.stop(signal.SIGKILL)


def test_a_follower_whose_consumer_delivers_nothing_repairs_itself(cluster, monkeypatch):
    """A consumer recreated on a lagging peer delivers nothing (nats-server 2.9.10 places it on
    any peer). Simulated here for one daemon (DIFFCAST_TEST_SILENT_FOLLOWER): the watch sees it
    behind the stream, reads the missing messages through the stream's leader, and keeps up."""
    collection = "silent"
    owner = BackboneDaemon(cluster).start()
    monkeypatch.setenv("DIFFCAST_TEST_SILENT_FOLLOWER", "1")
    follower = BackboneDaemon(cluster, owner=False).start()
    monkeypatch.delenv("DIFFCAST_TEST_SILENT_FOLLOWER")
    try:
        with owner.client() as client:
            client.append_sections(collection, [{"id": "s", "items": []}])
            for round in range(2):
                for n in range(100):
                    client.append_items(collection, [{"id": f"r{round}-{n}", "data": {"n": n}}])
                wait_until(lambda: holds(follower, collection) and converged([owner, follower], collection),
                           timeout=30, what="the silent follower to catch up")
                assert state(follower, collection)["version"] == 1 + 100 * (round + 1)
        assert "read through the stream leader" in follower.log()
        wait_until(lambda: backbone_stats(follower)["log_behind"] == 0, what="log_behind 0")
    finally:
        follower.stop(signal.SIGKILL)
        owner.stop(signal.SIGKILL)


def test_snapshots_cut_the_log_and_a_joining_daemon_starts_from_them(cluster):
    collection = "snapshotted"
    first = BackboneDaemon(cluster, extra=["--backbone-snapshot-every", "10"]).start()
    try:
        with first.client() as client:
            client.append_sections(collection, [{"id": "s", "items": []}])
            for n in range(105):
                client.append_items(collection, [{"id": f"i{n}", "data": {"n": n}}])
        stream = next(
            entry
            for account in cluster.monitor(0, "/jsz?streams=true")["account_details"]
            for entry in account["stream_detail"]
            if entry["name"] == "DIFFCAST_LOG"
        )
        # 106 messages were appended; what is left is the tail after the last snapshot.
        assert stream["state"]["messages"] <= 10, stream["state"]
        joining = BackboneDaemon(cluster).start()
        try:
            assert "snapshots=1" in joining.log()
            assert converged([first, joining], collection)
            with joining.client() as client:
                client.append_items(collection, ["after"])
            wait_until(lambda: converged([first, joining], collection), what="the daemons to converge")
            held = state(joining, collection)
            assert held["version"] == 107
            assert held["sections"][0]["items"][-1] == "after"
            assert held["sections"][0]["items"][49] == {"id": "i49", "data": {"n": 49}}
        finally:
            joining.stop(signal.SIGKILL)
    finally:
        first.stop(signal.SIGKILL)

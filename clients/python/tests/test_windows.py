"""Windows (contract 3) in the client, against the real daemon: ``subscribe``/``get``/``window``
with a window, a mirror that holds the view and says where it stands, ``follow`` with a window
through random writes, a damaged event and reconnections, and damaged windowed events that
only ever diverge."""

import copy
import itertools
import json
import random
import signal

import pytest

from diffcast import Client, DiffcastError, Divergence, Mirror, parse_preserving
from diffcast.testing import Daemon, Proxy

from conftest import daemon_binary


@pytest.fixture
def durable(tmp_path):
    with Daemon(daemon_binary(), ["--state-dir", str(tmp_path / "state")]) as running:
        yield running


def ids(n, prefix="i"):
    return ["%s%d" % (prefix, k) for k in range(n)]


def view_of(response):
    """A `get` result (or an event) as ``[(section id, [(item id, data)…])…]``, as ``Mirror.items`` gives it."""
    return [(s["id"], [(i["id"], i.get("data")) if isinstance(i, dict) else (i, None) for i in s.get("items", [])])
            for s in response["sections"]]


def held_items(mirror):
    return [item_id for _, items in mirror.items() for item_id, _ in items]


def test_subscribe_and_get_with_each_form_of_window(daemon):
    writer = daemon.client()
    writer.apply("c", [{"id": "s", "items": ids(6)}, {"id": "t", "data": {"title": "T"}, "items": ids(4, "j")}, {"id": "u"}])
    windows = {
        "first": ({"first": 3}, [("s", ["i0", "i1", "i2"])], {"offset": 0, "count": 3, "total": 10}),
        "last": ({"last": 5}, [("s", ["i5"]), ("t", ["j0", "j1", "j2", "j3"]), ("u", [])], {"offset": 5, "count": 5, "total": 10}),
        "anchor": ({"anchor": "i5", "before": 1, "after": 2}, [("s", ["i4", "i5"]), ("t", ["j0", "j1"])],
                   {"offset": 4, "count": 4, "total": 10, "anchor": "i5"}),
        "wider": ({"first": 1000}, [("s", ids(6)), ("t", ids(4, "j")), ("u", [])], {"offset": 0, "count": 10, "total": 10}),
    }
    for name, (window, shown, where) in windows.items():
        got = writer.get("c", window=window)
        assert [(sid, [i for i, _ in items]) for sid, items in view_of(got)] == shown, name
        assert got["window"] == where and got["version"] == 1, name
        reader = daemon.client()
        assert reader.subscribe("c", window=window)["version"] == 1
        mirror = Mirror()
        assert mirror.feed(parse_preserving(json.dumps(next(reader.events(timeout=5))))) == "snapshot"
        assert mirror.items() == view_of(got) and mirror.digest() == got["digest"], name
        assert mirror.window == where and mirror.version == 1, name
    assert dict(view_of(writer.get("c", window={"first": 7})))["t"] == [("j0", None)]


def test_window_errors_change_nothing(daemon):
    client = daemon.client()
    client.apply("c", [{"id": "s", "items": ["a", "b", "c"]}])
    cases = [
        (lambda: client.subscribe("c", since=1, window={"first": 2}), "invalid_argument", "since"),
        (lambda: client.subscribe("c", window={"first": 0}), "invalid_argument", "first"),
        (lambda: client.subscribe("c", window={"first": 2, "last": 2}), "invalid_argument", None),
        (lambda: client.subscribe("c", window={"frist": 2}), "invalid_argument", "frist"),
        (lambda: client.subscribe("c", window={"anchor": "ghost"}), "unknown_item", "ghost"),
        (lambda: client.subscribe("c", window={"first": 10001}), "limit_exceeded", None),
        (lambda: client.window("c", {"first": 2}), "invalid_argument", None),  # no windowed subscription yet
        (lambda: client.get("c", window={"anchor": "ghost", "after": 1}), "unknown_item", "ghost"),
        (lambda: client.subscribe("nowhere", window={"anchor": "a"}), "unknown_item", None),
    ]
    for call, code, named in cases:
        with pytest.raises(DiffcastError) as error:
            call()
        assert error.value.code == code, error.value
        assert named is None or named in error.value.message, error.value
    assert "nowhere" not in [c["name"] for c in client.list()]  # a rejected subscribe creates nothing
    client.subscribe("c", window={"first": 1})
    with pytest.raises(DiffcastError):
        client.window("c", {"anchor": "ghost"})
    assert client._windows["c"] == {"first": 1}  # the subscription goes on as it was
    client.apply("c", [{"id": "s", "items": ["z", "a", "b", "c"]}])
    events = list(client.events(timeout=0.5))
    assert [e["event"] for e in events] == ["snapshot", "changeset"]
    assert events[1]["window"] == {"offset": 0, "count": 1, "total": 4}


def test_the_window_op_sends_the_changeset_to_the_new_view_before_its_response(daemon):
    writer, reader = daemon.client(), daemon.client()
    writer.apply("c", [{"id": "s", "items": ids(5)}, {"id": "t", "items": ids(5, "j")}])
    follow = reader.follow("c", window={"first": 2}, timeout=5)
    event, mirror = next(follow)
    assert held_items(mirror) == ["i0", "i1"]
    response = reader.window("c", {"anchor": "j2", "before": 3, "after": 1})
    assert response["op"] == "window" and response["version"] == 1
    assert len(reader._events) == 1  # the changeset came before the response
    event, mirror = next(follow)
    assert (event["event"], event["from"], event["version"]) == ("changeset", 1, 1)
    assert held_items(mirror) == ["i4", "j0", "j1", "j2", "j3"]
    assert mirror.window == {"offset": 4, "count": 5, "total": 10, "anchor": "j2"}
    assert mirror.digest() == writer.get("c", window={"anchor": "j2", "before": 3, "after": 1})["digest"]
    reader.window("c", {"anchor": "j2", "before": 3, "after": 1})  # the same view: nothing
    writer.delete_items("c", ["j2"])  # the anchor passes to j3
    event, mirror = next(follow)
    assert event["from"] == 1 and event["version"] == 2
    assert mirror.window == {"offset": 4, "count": 5, "total": 9, "anchor": "j3"}
    assert held_items(mirror) == ["i4", "j0", "j1", "j3", "j4"]


def random_write(rng, writer, n):
    state = writer.get("c")
    present = [i["id"] if isinstance(i, dict) else i for s in state["sections"] for i in s.get("items", [])]
    sections = [s["id"] for s in state["sections"]]
    kind = rng.choice(["head", "tail", "tail", "update", "delete", "move", "section"])
    if kind == "head" and present:
        return "insert_items", {"items": [{"id": "h%d" % n, "data": n}], "before": present[0]}
    if kind == "update" and present:
        return "update_items", {"items": [{"id": rng.choice(present), "data": {"v": n}}]}
    if kind == "delete" and len(present) > 3:
        return "delete_items", {"items": rng.sample(present, rng.randint(1, 2))}
    if kind == "move" and len(present) > 2:
        a, b = rng.sample(present, 2)
        return "move_item", {"item": a, rng.choice(["before", "after"]): b}
    if kind == "section" or not sections:
        return "append_sections", {"sections": [{"id": "s%d" % n, "items": ["t%d" % n] if rng.random() < 0.7 else []}]}
    return "append_items", {"items": ["t%d" % n], "section": rng.choice(sections)}


@pytest.mark.parametrize("window", [{"first": 4}, {"last": 3}, {"anchor": "a2", "before": 2, "after": 2}],
                         ids=["first", "last", "anchor"])
def test_a_followed_window_equals_get_with_that_window_at_every_version(daemon, window):
    writer, reader = daemon.client(), daemon.client()
    writer.apply("c", [{"id": "s", "items": ids(6, "a")}])
    follow = reader.follow("c", window=window, timeout=5)
    event, mirror = next(follow)
    rng = random.Random(11)
    events, quiet = [event], 0
    for n in range(150):
        op, arguments = random_write(rng, writer, n)
        version = writer.request(op, "c", **arguments)["version"]
        try:  # the view now, around the anchor the mirror holds
            now = dict(window, anchor=mirror.window["anchor"]) if "anchor" in window else window
            unchanged = view_of(writer.get("c", window=now)) == mirror.items()
        except DiffcastError as error:
            assert error.code == "unknown_item"
            unchanged = False  # the anchor went: the view changes
        if unchanged:
            quiet += 1  # no event is due (one that came anyway shows as the next event's version)
            continue
        event, mirror = next(follow)
        events.append(event)
        assert event["event"] == "changeset" and event["version"] == version
        now = dict(window, anchor=mirror.window["anchor"]) if "anchor" in window else window
        state = writer.get("c", window=now)
        assert mirror.items() == view_of(state) and mirror.digest() == state["digest"]
        assert mirror.window == state["window"]
    version = writer.delete_all("c")  # every view changes: an extra event before it would show
    event, mirror = next(follow)
    assert (event["version"], mirror.items(), mirror.window.get("anchor")) == (version, [], None)
    assert quiet > 10 and len(events) > 20, (quiet, len(events))
    assert all(b["from"] == a["version"] for a, b in zip(events, events[1:]))
    assert mirror.divergences == []


def test_a_damaged_windowed_event_makes_follow_subscribe_again_with_its_window(daemon):
    proxy = Proxy(daemon.socket_path, daemon.directory)
    writer = daemon.client()
    writer.apply("c", [{"id": "s", "items": ids(8)}])
    follow = Client(proxy.socket_path).follow("c", window={"last": 3}, timeout=5)
    next(follow)
    proxy.damage_next_event(lambda line: line.replace(b'"count":3', b'"count":4'))
    writer.append_items("c", ["x"])
    writer.append_items("c", ["y"])
    event, mirror = next(follow)
    assert len(mirror.divergences) == 1 and "window.count" in mirror.divergences[0]
    assert event["event"] == "snapshot" and event["window"] == {"offset": 7, "count": 3, "total": 10}
    assert held_items(mirror) == ["i7", "x", "y"] and mirror.digest() == writer.get("c", window={"last": 3})["digest"]
    proxy.close()


def test_follow_subscribes_again_with_the_moved_window_after_a_restart(durable):
    writer = durable.client()
    writer.apply("c", [{"id": "s", "items": ids(10)}])
    reader = durable.client()
    follow = reader.follow("c", window={"first": 2}, timeout=5, reconnect_for=10)
    event, mirror = next(follow)
    reader.window("c", {"last": 2})
    event, mirror = next(follow)
    assert held_items(mirror) == ["i8", "i9"]
    durable.restart(signal.SIGKILL)
    writer = durable.client()
    writer.append_items("c", ["x"])
    event, mirror = next(follow)  # a snapshot of the last window, never a catch-up from `since`
    assert event["event"] == "snapshot" and event["version"] == 2
    assert held_items(mirror) == ["i9", "x"] and mirror.window == {"offset": 9, "count": 2, "total": 11}
    assert mirror.divergences == []


def test_an_anchor_window_takes_up_again_around_its_anchor_or_the_item_that_takes_its_place(durable):
    writer = durable.client()
    writer.apply("c", [{"id": "s", "items": ids(10)}])
    follow = durable.client().follow("c", window={"anchor": "i2", "before": 1, "after": 1}, timeout=5, reconnect_for=10)
    next(follow)
    writer.delete_items("c", ["i2"])  # while subscribed: the daemon passes the anchor to i3
    event, mirror = next(follow)
    assert mirror.window["anchor"] == "i3" and held_items(mirror) == ["i1", "i3", "i4"]

    durable.restart(signal.SIGKILL)
    writer = durable.client()
    writer.update_items("c", {"i5": 5})
    event, mirror = next(follow)  # around i3, the anchor it held, not i2 it asked for first
    assert event["event"] == "snapshot" and mirror.window["anchor"] == "i3"
    assert held_items(mirror) == ["i1", "i3", "i4"]

    durable.restart(signal.SIGKILL)
    writer = durable.client()
    writer.delete_items("c", ["i3"])  # while disconnected: the next item of the view it held
    event, mirror = next(follow)
    assert event["event"] == "snapshot" and mirror.window["anchor"] == "i4"
    assert held_items(mirror) == ["i1", "i4", "i5"]

    durable.restart(signal.SIGKILL)
    writer = durable.client()
    writer.delete_items("c", ["i4", "i5"])  # after it nothing is left in the view: the one before
    event, mirror = next(follow)
    assert mirror.window["anchor"] == "i1" and held_items(mirror) == ["i0", "i1", "i6"]

    durable.restart(signal.SIGKILL)
    writer = durable.client()
    writer.apply("c", [{"id": "s", "items": ["n0", "n1", "n2"]}])  # none of the view is left: the first item
    event, mirror = next(follow)
    assert mirror.window["anchor"] == "n0" and held_items(mirror) == ["n0", "n1"]
    assert mirror.divergences == []


# Damaged windowed events: hand-made from real ones.

@pytest.fixture(scope="module")
def recorded():
    """A windowed snapshot and changeset of a real daemon, parsed as the client parses a line."""
    with Daemon(daemon_binary()) as daemon:
        writer, reader = daemon.client(), daemon.client()
        writer.apply("c", [{"id": "s", "items": ["a", "b", "c", "d"]}, {"id": "t", "items": ["e", "f"]}])
        reader.subscribe("c", window={"anchor": "c", "before": 1, "after": 2})
        writer.delete_items("c", ["b"])
        events = [parse_preserving(json.dumps(e)) for e in itertools.islice(reader.events(timeout=5), 2)]
    assert [e["event"] for e in events] == ["snapshot", "changeset"]
    return events


def damaged_window(event, change):
    event = copy.deepcopy(event)
    change(event["window"]) if isinstance(event.get("window"), dict) else None
    return event


def set_key(key, value):
    def change(window):
        if value is DROP:
            del window[key]
        else:
            window[key] = value
    return change


DROP = object()
DAMAGES = {
    "count one more": set_key("count", 5),
    "count one less": set_key("count", 3),
    "count negative": set_key("count", -1),
    "count a string": set_key("count", "4"),
    "count a float": set_key("count", parse_preserving("4.0")),
    "no count": set_key("count", DROP),
    "no offset": set_key("offset", DROP),
    "offset a bool": set_key("offset", True),
    "offset past the total": set_key("offset", 4),
    "total too small": set_key("total", 3),
    "total null": set_key("total", None),
    "total past 64 bits": set_key("total", 2 ** 64),
    "anchor not in the view": set_key("anchor", "f"),
    "anchor null with items": set_key("anchor", None),
    "anchor a list": set_key("anchor", ["c"]),
    "anchor a float": set_key("anchor", 1.5),
}


@pytest.mark.parametrize("change", DAMAGES.values(), ids=DAMAGES.keys())
@pytest.mark.parametrize("which", [0, 1], ids=["snapshot", "changeset"])
def test_a_damaged_window_object_is_a_divergence_and_changes_nothing(recorded, change, which):
    events = copy.deepcopy(recorded)
    mirror = Mirror()
    if which:
        mirror.feed(events[0])
    before = (mirror.version, mirror.window, mirror.digest(), mirror.items())
    with pytest.raises(Divergence):
        mirror.feed(damaged_window(events[which], change))
    assert (mirror.version, mirror.window, mirror.digest(), mirror.items()) == before
    for event in events[which:]:
        mirror.feed(event)
    assert mirror.window == {"offset": 0, "count": 4, "total": 5, "anchor": "c"}
    assert held_items(mirror) == ["a", "c", "d", "e"]


def test_windowed_and_whole_events_do_not_mix(recorded):
    snapshot, changeset = copy.deepcopy(recorded)
    for event in (dict(changeset, window=None), dict(changeset, window=[1]), {k: v for k, v in changeset.items() if k != "window"}):
        mirror = Mirror()
        mirror.feed(snapshot)
        with pytest.raises(Divergence):
            mirror.feed(event)
        assert mirror.version == int(snapshot["version"]) and mirror.window["anchor"] == "c"
    whole = Mirror()
    whole.feed({k: v for k, v in snapshot.items() if k != "window"})  # the view's sections as a whole collection
    assert whole.window is None
    with pytest.raises(Divergence) as error:
        whole.feed(changeset)
    assert "windowed changeset" in str(error.value)
    whole.feed(snapshot)  # a windowed snapshot starts a windowed mirror
    assert whole.feed(changeset) == "changeset" and whole.window["anchor"] == "c"
    assert whole.feed({"event": "dropped", "collection": "c"}) == "dropped" and whole.window is None

"""Windows (contract 3) through the real daemon, every event checked against the reference
model (../shared/conformance/model.py), never against the daemon's own output: a feed growing
at both ends under `first`/`last` windows, an anchor whose item and neighbours are deleted,
moved across sections and re-inserted, a thousand subscribers of one head window, and a
stalled windowed subscriber caught up in one changeset."""

import collections
import importlib.util
import json
import math
import os
import pathlib
import random
import resource
import socket
import time

import pytest
from conftest import REPOSITORY, binary

from diffcast.testing import Daemon

MODEL_PATH = (pathlib.Path(os.environ["CHECKER"]).parent if os.environ.get("CHECKER")
              else REPOSITORY.parent / "shared" / "conformance") / "model.py"
if not MODEL_PATH.exists():
    pytest.skip("the reference model %s is not there" % MODEL_PATH, allow_module_level=True)
_spec = importlib.util.spec_from_file_location("diffcast_reference_model", MODEL_PATH)
M = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(M)
M.CONTRACT["version"] = 3

TIMEOUT = 30  # seconds a line may take: generous, never a measurement


class Line:
    """One connection: requests answered in order, events kept (raw bytes and parsed) until read."""

    def __init__(self, path):
        deadline = time.monotonic() + TIMEOUT
        while True:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.settimeout(TIMEOUT)
            try:
                self.sock.connect(path)
                break
            except BlockingIOError:  # the listen backlog is full for a moment (a thousand connect at once)
                self.sock.close()
                assert time.monotonic() < deadline, "cannot connect to %s" % path
                time.sleep(0.01)
        self.buffer = b""
        self.events = collections.deque()

    def send(self, request):
        self.sock.sendall(json.dumps(request, separators=(",", ":")).encode() + b"\n")

    def read_line(self):
        while b"\n" not in self.buffer:
            chunk = self.sock.recv(1 << 16)
            assert chunk, "the daemon closed the connection"
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line

    def response(self):
        while True:
            line = self.read_line()
            message = json.loads(line)
            if "event" in message:
                self.events.append((line, message))
            else:
                return message

    def request(self, request):
        self.send(request)
        return self.response()

    def event(self):
        if self.events:
            return self.events.popleft()
        line = self.read_line()
        message = json.loads(line)
        assert "event" in message, "a response where an event was due: %s" % line[:300]
        return line, message

    def close(self):
        self.sock.close()


def ok(response, what):
    assert response.get("ok") is True, "%s: %s" % (what, response)
    return response


class Feed:
    """The writer's side of one collection: writes sent one at a time (so each is its own
    version), the model's state at every published version, and the watches told of each."""

    def __init__(self, line, name):
        self.line, self.name = line, name
        self.model = M.Model()
        self.version = 0
        self.states = {0: []}
        self.watches = []
        self.marks = {}

    @property
    def state(self):
        return self.states[self.version]

    def write(self, request):
        request = dict(request, collection=self.name)
        response = ok(self.line.request(request), json.dumps(request)[:200])
        before = M.copy_state(self.model.state)
        self.model.write(request)
        version = response["version"]
        if version == self.version:
            same, why = M.same_state(before, self.model.state)
            assert same and not (self.model.reloaded or self.model.reconfigured or self.model.reloaded_sections), (
                "%s answered the current version %d, but it changes the model: %s" % (request, version, why))
            return version
        assert version == self.version + 1, "%s answered version %d after %d" % (request, version, self.version)
        marks = (set(self.model.reloaded), set(self.model.reconfigured), set(self.model.reloaded_sections))
        self.model.published()
        state = M.copy_state(self.model.state)
        for watch in self.watches:
            watch.advance(version, self.state, state, marks)
        self.states[version], self.marks[version], self.version = state, marks, version
        return version

    def item_ids(self):
        return M.item_ids(self.state)


class Checker:
    """Checks one subscription's events against the model's plan, holding what the subscriber
    holds (the snapshot's view, each changeset applied with the normative algorithm)."""

    def __init__(self, name, collection, epoch):
        self.name, self.collection, self.epoch = name, collection, epoch
        self.held = None

    def check(self, event, entry):
        kind, start, version, view, meta, changes = entry
        who = "%s (expected a %s at version %d)" % (self.name, kind, version)
        assert event.get("event") == kind and event.get("version") == version, "%s: got %s" % (who, json.dumps(event)[:400])
        assert event.get("collection") == self.collection and event.get("epoch") == self.epoch, who
        if kind == "changeset":
            assert event.get("from") == start, "%s: from %s, the previous event's version is %s" % (who, event.get("from"), start)
            try:
                self.held = M.apply_changeset(self.held, event)
            except (M.Inconsistent, KeyError, TypeError, ValueError, IndexError) as error:
                raise AssertionError("%s: does not apply to the view held: %s: %s" % (who, error, json.dumps(event)[:400]))
            assert M.changeset_order_problem(event) is None, "%s: %s" % (who, M.changeset_order_problem(event))
            have, want = M.changeset_shape(event), M.changeset_shape(changes)
            assert have == want, "%s: changeset %s, the model's %s" % (
                who, {k: v for k, v in have.items() if v}, {k: v for k, v in want.items() if v})
        else:
            self.held = M.state_from_wire(event.get("sections") or [])
        window = dict(event.get("window") or {})
        if window.get("anchor") is not None:
            window["anchor"] = M.norm_id(window["anchor"])
        assert window == meta, "%s: window %s, the model's %s" % (who, event.get("window"), meta)
        same, why = M.same_state(self.held, view)
        assert same, "%s: the view differs from the model's: %s" % (who, why)
        assert event.get("digest") == M.digest(view), "%s: digest %s, the view's %s" % (who, event.get("digest"), M.digest(view))


class Watch:
    """A windowed subscriber and the model's plan of its events: a snapshot, then a changeset for
    each version that changes its view (model.window_changeset), none for the others."""

    def __init__(self, feed, name, window, line):
        self.feed, self.name, self.window, self.line = feed, name, window, line
        self.plan = []     # (kind, from, version, view, meta, changeset) of every event due
        self.checked = 0   # how many of the plan's events came and were checked
        self.quiet = []    # versions that left the view as it was
        self.lines = []    # the raw event lines received

    def subscribe(self):
        response = ok(self.line.request({"op": "subscribe", "collection": self.feed.name, "window": self.window}),
                      "%s: subscribe" % self.name)
        assert response["version"] == self.feed.version
        self.start(response["epoch"])
        self.feed.watches.append(self)
        return self

    def start(self, epoch):
        state = self.feed.state
        self.win = M.WindowModel(self.window, state)
        self.view, meta = self.win.view(state)
        self.plan.append(("snapshot", None, self.feed.version, self.view, meta, None))
        self.checker = Checker(self.name, self.feed.name, epoch)

    @property
    def chain(self):
        return self.plan[-1][2]

    @property
    def meta(self):
        return self.plan[-1][4] if self.plan else None

    def advance(self, version, previous, state, marks):
        self.win.advance(previous, state)
        view, meta = self.win.view(state)
        changes = M.window_changeset(self.view, view, marks)
        if M.changeset_empty(changes):
            self.quiet.append(version)
        else:
            self.plan.append(("changeset", self.chain, version, view, meta, changes))
        self.view = view

    def rewindow(self, window):
        """The `window` op: the changeset to the new view comes before its response."""
        self.drain()
        queued = len(self.line.events)
        response = ok(self.line.request({"op": "window", "collection": self.feed.name, "window": window}), "window")
        assert response["version"] == self.feed.version
        self.window, self.win = window, M.WindowModel(window, self.feed.state)
        view, meta = self.win.view(self.feed.state)
        changes = M.window_changeset(self.view, view)
        self.view = view
        if not M.changeset_empty(changes):
            self.plan.append(("changeset", self.chain, self.feed.version, view, meta, changes))
            assert len(self.line.events) > queued, "%s: the window op was answered before its changeset" % self.name
        self.drain()

    def drain(self):
        """Reads and checks every event the plan has due."""
        while self.checked < len(self.plan):
            raw, event = self.line.event()
            self.lines.append(raw)
            self.checker.check(event, self.plan[self.checked])
            self.checked += 1

    def versions(self):
        return [entry[2] for entry in self.plan]


def check_get(feed, line, window, anchor=None):
    """`get` with a window against the model's view at the current version."""
    got = ok(line.request({"op": "get", "collection": feed.name, "window": window}), "get %s" % window)
    parsed = M.parse_window(window)
    lo, hi, n = M.window_range(parsed, feed.state, parsed.get("anchor"))
    view = M.window_view(feed.state, lo, hi)
    same, why = M.same_state(M.state_from_wire(got["sections"]), view)
    assert same, "get %s: %s" % (window, why)
    assert got["version"] == feed.version and got["digest"] == M.digest(view)
    assert got["window"] == M.window_meta(parsed, lo, hi, n, parsed.get("anchor"))


def finish(feed, watches, request):
    """A last write that changes every view: an event a watch got that the model did not plan
    would come before it and show."""
    version = feed.write(request)
    for watch in watches:
        assert watch.chain == version, "%s: the last write should change its view" % watch.name
        watch.drain()


# a. A feed growing at its head and its tail under first and last windows.

def test_a_feed_growing_at_both_ends_under_first_and_last_windows(daemon):
    writer = Line(daemon.socket_path)
    feed = Feed(writer, "feed")
    feed.write({"op": "apply", "sections": [{"id": "today", "data": {"day": 1}, "items": ["p0", "p1", "p2"]}]})
    windows = {"first5": {"first": 5}, "last5": {"last": 5}, "first1": {"first": 1}, "last3": {"last": 3}}
    watches = {name: Watch(feed, name, w, Line(daemon.socket_path)).subscribe() for name, w in windows.items()}
    rng = random.Random(20240501)
    head, tail = [], []  # versions of inserts at the head and appends at the tail once 5 items are there
    for n in range(60):
        ids = feed.item_ids()
        roll = rng.random()
        if roll < 0.35:
            request = {"op": "insert_items", "before": ids[0], "items": [{"id": "h%d" % n, "data": {"n": n}}]}
        elif roll < 0.7:
            request = {"op": "append_items", "items": ["t%d" % n] + (["u%d" % n] if rng.random() < 0.3 else [])}
        elif roll < 0.78:
            request = {"op": "insert_sections", "before": feed.state[0][0], "sections": [{"id": "s%d" % n, "items": ["hs%d" % n]}]}
        elif roll < 0.84:
            request = {"op": "append_sections", "sections": [{"id": "s%d" % n, "items": ["ts%d" % n] if rng.random() < 0.5 else []}]}
        elif roll < 0.92:
            request = {"op": "update_items", "items": [{"id": rng.choice(ids), "data": {"edit": n}}]}
        else:
            request = {"op": rng.choice(["reconfigure_items", "reload_items"]), "items": [rng.choice(ids)]}
        full = len(ids) > 5  # at exactly 5, an empty section at the tail is in the first-5 view
        version = feed.write(request)
        if full and request["op"] == "insert_items":
            head.append(version)
        if full and request["op"] == "append_items":
            tail.append(version)
        if n % 7 == 3:
            for w in windows.values():
                check_get(feed, writer, w)
        if n % 5 == 0:
            for watch in watches.values():
                watch.drain()
    finish(feed, watches.values(), {"op": "apply", "sections": [{"id": "tomorrow", "items": ["z%d" % k for k in range(8)]}]})
    first5, last5 = watches["first5"], watches["last5"]
    assert head and tail and first5.quiet and last5.quiet
    assert not set(tail) & set(first5.versions()), "appends at the tail reached the full first-5 window"
    assert set(tail) <= set(first5.quiet) and set(head) <= set(last5.quiet)
    assert set(head) <= set(first5.versions()) and set(tail) <= set(last5.versions())
    assert len(watches["first1"].quiet) >= len(first5.quiet) > 0


# b. An anchor that is deleted, loses its neighbours, moves across sections and comes back.

def test_an_anchor_window_follows_its_item_and_passes_on_per_the_spec(daemon):
    writer = Line(daemon.socket_path)
    feed = Feed(writer, "thread")
    feed.write({"op": "apply", "sections": [
        {"id": "A", "items": ["a%d" % k for k in range(6)]},
        {"id": "B", "data": {"title": "B"}, "items": ["b%d" % k for k in range(6)]},
        {"id": "E"},
        {"id": "C", "items": ["c%d" % k for k in range(6)]}]})
    wide = Watch(feed, "wide", {"anchor": "a3", "before": 2, "after": 2}, Line(daemon.socket_path)).subscribe()
    tight = Watch(feed, "tight", {"anchor": "a3", "before": 1}, Line(daemon.socket_path)).subscribe()
    other = Watch(feed, "other", {"anchor": "b2", "after": 3}, Line(daemon.socket_path)).subscribe()
    watches = [wide, tight, other]

    def step(request, anchors):
        """One write; then the model's anchors (model.reanchor) must be the ones written here, and
        every event the daemon sent must be the model's."""
        prev = feed.state
        held = [w.win.anchor for w in watches]
        version = feed.write(request)
        for watch, was, want in zip(watches, held, anchors):
            assert watch.win.anchor == M.reanchor(was, prev, feed.state) == want, (watch.name, request, watch.win.anchor, want)
        for watch in watches:
            watch.drain()
        return version

    def shown(watch):
        return [iid for _, _, items in watch.view for iid, _ in items]

    step({"op": "delete_items", "items": ["a3"]}, ["a4", "a4", "b2"])  # the anchor goes: the next item takes it
    assert shown(wide) == ["a1", "a2", "a4", "a5", "b0"] and wide.plan[-1][4]["anchor"] == "a4"
    step({"op": "delete_items", "items": ["a2", "a5"]}, ["a4", "a4", "b2"])  # its neighbours go
    assert shown(wide) == ["a0", "a1", "a4", "b0", "b1"]
    quiet = len(tight.quiet)
    step({"op": "insert_items", "after": "a4", "items": ["n1"]}, ["a4", "a4", "b2"])  # after the tight anchor: not in its view
    assert len(tight.quiet) == quiet + 1 and shown(tight) == ["a1", "a4"]
    step({"op": "delete_items", "items": ["a4"]}, ["n1", "n1", "b2"])  # ...yet it takes the anchor when a4 goes
    assert shown(tight) == ["a1", "n1"] and tight.plan[-1][4] == {"offset": 1, "count": 2, "total": 15, "anchor": "n1"}
    step({"op": "move_item", "item": "n1", "after": "c5"}, ["n1", "n1", "b2"])  # across sections, to the end
    assert shown(wide) == ["c4", "c5", "n1"] and [s[0] for s in wide.view] == ["C"]
    step({"op": "delete_items", "items": ["n1"]}, ["c5", "c5", "b2"])  # nothing after it: the last before it
    step({"op": "move_item", "item": "c5", "before": "a0"}, ["c5", "c5", "b2"])  # across sections, to the head
    assert shown(wide) == ["c5", "a0", "a1"] and wide.plan[-1][4]["offset"] == 0
    # the anchor and the items after it go, and a3 comes back before b0, in one version: the
    # anchor passes to b0, the first survivor after it (a3 was not there before)
    step({"op": "batch", "ops": [{"op": "delete_items", "items": ["c5", "a0", "a1"]},
                                 {"op": "insert_items", "before": "b0", "items": ["a3"]}]}, ["b0", "b0", "b2"])
    assert shown(tight) == ["a3", "b0"]
    step({"op": "delete_items", "items": ["b2"]}, ["b0", "b0", "b3"])
    step({"op": "insert_items", "after": "b1", "items": [{"id": "b2", "data": "again"}]}, ["b0", "b0", "b3"])  # b2 is back: b3 keeps the anchor
    assert shown(other) == ["b3", "b4", "b5", "c0"]
    # deleted and put elsewhere in one version: the same identifier, so the anchor stays and moves with it
    step({"op": "batch", "ops": [{"op": "delete_items", "items": ["b3"]}, {"op": "append_items", "section": "E", "items": ["b3"]}]},
         ["b0", "b0", "b3"])
    assert shown(other) == ["b3", "c0", "c1", "c2"] and [s[0] for s in other.view] == ["E", "C"]
    check_get(feed, writer, {"anchor": "b3", "before": 2, "after": 1})
    step({"op": "update_sections", "sections": [{"id": "E", "data": {"title": "E"}}]}, ["b0", "b0", "b3"])
    step({"op": "reload_items", "items": ["b3", "c0"]}, ["b0", "b0", "b3"])
    assert other.plan[-1][5]["items"]["reloaded"] and not any(v == feed.version for v in wide.versions())
    wide.rewindow({"anchor": "c2", "before": 1, "after": 1})  # the window op, then on as an anchor window
    step({"op": "delete_items", "items": ["c1", "c2", "c3"]}, ["c4", "b0", "b3"])
    wide.rewindow({"anchor": "c4", "before": 1, "after": 1})  # the same view: no changeset
    step({"op": "delete_all"}, [None, None, None])  # no items: no anchor, an empty view
    assert wide.plan[-1][4] == {"offset": 0, "count": 0, "total": 0, "anchor": None}
    step({"op": "append_sections", "sections": [{"id": "F"}]}, [None, None, None])  # still no item
    step({"op": "append_items", "items": ["f0", "f1", "f2", "f3"]}, ["f0", "f0", "f0"])  # the first item takes it
    assert shown(wide) == ["f0", "f1"] and shown(tight) == ["f0"]  # wide is 1 + anchor + 1 since its window op

    # then seeded writes around the anchors: deletions of anchors and neighbours, moves across
    # sections, re-insertions of identifiers that went, all checked against model.reanchor
    rng = random.Random(777)
    gone = []
    for n in range(60):
        ids = feed.item_ids()
        sections = [s[0] for s in feed.state]
        anchors = [w.win.anchor for w in watches if w.win.anchor is not None]
        roll = rng.random() if anchors else 0.7
        if roll < 0.25 and len(ids) > 4:
            target = rng.choice(anchors)
            p = ids.index(target)
            victims = sorted(set(ids[max(0, p - rng.randint(0, 2)):p + rng.randint(1, 3)]))
            gone += victims
            request = {"op": "delete_items", "items": victims}
        elif roll < 0.45 and len(ids) > 2:
            item, where = rng.choice(anchors), rng.choice([i for i in ids if i not in anchors] or ids)
            if item == where:
                continue
            request = {"op": "move_item", "item": item, rng.choice(["before", "after"]): where}
        elif roll < 0.65 and gone and ids:
            back = gone.pop(rng.randrange(len(gone)))
            if back in ids:
                continue
            request = {"op": "insert_items", rng.choice(["before", "after"]): rng.choice(ids), "items": [back]}
        elif roll < 0.75:
            request = {"op": "append_sections", "sections": [{"id": "G%d" % n, "items": ["g%d" % n] if rng.random() < 0.6 else []}]}
        elif roll < 0.85 and len(sections) > 2:
            request = {"op": "delete_sections", "sections": [rng.choice(sections)]}
        else:
            request = {"op": "append_items", "section": rng.choice(sections), "items": ["x%d" % n, "y%d" % n]} if sections \
                else {"op": "append_sections", "sections": [{"id": "G%d" % n, "items": ["g%d" % n]}]}
        prev, held = feed.state, [w.win.anchor for w in watches]
        feed.write(request)
        for watch, was in zip(watches, held):
            assert watch.win.anchor == M.reanchor(was, prev, feed.state)
        for watch in watches:
            watch.drain()
    finish(feed, watches, {"op": "apply", "sections": [{"id": "Z", "items": ["z0", "z1", "z2"]}]})
    assert all(w.quiet for w in watches) and sum(len(w.plan) for w in watches) > 60


# c. A thousand subscribers of one head window.

def test_a_thousand_subscribers_of_one_head_window_get_the_model_events(tmp_path):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 2600  # ours and the daemon's (which inherits the limit), with room
    if soft < want:
        if hard != resource.RLIM_INFINITY and hard < want:
            pytest.skip("RLIMIT_NOFILE hard limit %d is under %d" % (hard, want))
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    with Daemon(binary("diffcastd"), directory=str(tmp_path)) as daemon:
        writer = Line(daemon.socket_path)
        feed = Feed(writer, "home")
        feed.write({"op": "apply", "sections": [{"id": "s0", "items": ["i%d" % k for k in range(15)]},
                                                {"id": "s1", "items": ["j%d" % k for k in range(15)]}]})
        window = {"first": 20}
        lines = [Line(daemon.socket_path) for _ in range(1000)]
        for line in lines:
            line.send({"op": "subscribe", "collection": "home", "window": window})
        epochs = {ok(line.response(), "subscribe")["epoch"] for line in lines}
        assert len(epochs) == 1
        model = Watch(feed, "first20", window, None)  # the plan every subscriber must follow
        model.start(epochs.pop())
        feed.watches.append(model)
        rng = random.Random(99)
        outside = []
        for n in range(20):
            ids = feed.item_ids()
            inside = ids[:20]
            kind = ["tail", "update-out", "insert-out", "head", "update-in", "delete-in", "move-in", "move-out"][n % 8]
            request = {
                "tail": {"op": "append_items", "items": ["t%d" % n]},
                "update-out": {"op": "update_items", "items": [{"id": rng.choice(ids[20:]), "data": n}]},
                "insert-out": {"op": "insert_items", "after": rng.choice(ids[20:]), "items": ["o%d" % n]},
                "head": {"op": "insert_items", "before": ids[0], "items": [{"id": "h%d" % n, "data": {"n": n}}]},
                "update-in": {"op": "update_items", "items": [{"id": rng.choice(inside), "data": {"n": n}}]},
                "delete-in": {"op": "delete_items", "items": [rng.choice(inside)]},
                "move-in": {"op": "move_item", "item": rng.choice(ids[20:]), "before": rng.choice(inside)},
                "move-out": {"op": "move_item", "item": rng.choice(inside), "after": ids[-1]},
            }[kind]
            version = feed.write(request)
            if kind in ("tail", "update-out", "insert-out"):
                outside.append(version)
        finish(feed, [], {"op": "delete_items", "items": feed.item_ids()[:3]})
        assert model.chain == feed.version and len(outside) >= 7 and set(outside) <= set(model.quiet)
        assert not set(outside) & set(model.versions())
        due = len(model.plan)
        streams = collections.Counter()
        for line in lines:
            streams[tuple(line.event()[0] for _ in range(due))] += 1
        assert sum(streams.values()) == 1000
        for stream in streams:  # the same bytes need checking once
            checker = Checker("a first-20 subscriber", "home", model.checker.epoch)
            for raw, entry in zip(stream, model.plan):
                checker.check(json.loads(raw), entry)
            assert json.loads(stream[-1])["digest"] == M.digest(model.view)
        check_get(feed, writer, window)
        for line in lines:
            line.close()


# d. A windowed subscriber that stops reading, then is caught up in one changeset.

def flood(feed, reader, rng, size=6000):
    """Writes, each of which changes the first-10 view, of many more bytes than the kernel holds
    for a socket (so a subscriber that does not read passes max_unsent_bytes); `reader` keeps up."""
    try:
        kernel = int(pathlib.Path("/proc/sys/net/core/wmem_default").read_text())
    except (OSError, ValueError):
        kernel = 212992
    big = None  # one big item in the window at a time: many bytes per event, a light model
    for n in range(min(800, max(100, math.ceil(3 * kernel / size)))):
        ids = feed.item_ids()
        if n % 9 == 4:
            request = {"op": "insert_items", "before": ids[rng.randrange(10)], "items": ["h%d" % n]}
        elif n % 9 == 7:
            request = {"op": "delete_items", "items": [rng.choice([i for i in ids[:10] if i != big])]}
        elif n % 9 == 8:
            request = {"op": "move_item", "item": rng.choice(ids[10:]), "before": rng.choice(ids[:10])}
        else:
            target = rng.choice([i for i in ids[:10] if i != big])
            items = [{"id": target, "data": "%d:%s" % (n, "x" * size)}] + ([{"id": big, "data": n}] if big in ids else [])
            request = {"op": "update_items", "items": items}
            big = target
        feed.write(request)
        if n % 10 == 0:
            reader.drain()  # the daemon is not slowed by the one that does not read


@pytest.mark.parametrize("history", [4096, 8], ids=["history-reaches-back", "history-forgotten"])
def test_a_stalled_windowed_subscriber_is_caught_up_in_one_changeset(tmp_path, history):
    """With the versions it missed still kept, the catch-up is one changeset from its last view
    (SPEC "Windows"); once they are forgotten it may be a snapshot of the view (SPEC "Delivery")."""
    arguments = ["--max-unsent-bytes", "1024", "--history-versions", str(history)]
    with Daemon(binary("diffcastd"), arguments, directory=str(tmp_path)) as daemon:
        writer = Line(daemon.socket_path)
        feed = Feed(writer, "wall")
        feed.write({"op": "apply", "sections": [{"id": "s", "items": [{"id": "i%d" % k, "data": k} for k in range(30)]}]})
        window = {"first": 10}
        stalled = Watch(feed, "stalled", window, Line(daemon.socket_path)).subscribe()
        reader = Watch(feed, "reader", window, Line(daemon.socket_path)).subscribe()
        stalled.drain()  # its snapshot; then it reads nothing
        flood(feed, reader, random.Random(5))
        reader.drain()
        assert reader.chain == feed.version
        last = feed.version

        # The stalled one reads again: what was already queued, in order, then one catch-up.
        events = []
        while not events or events[-1][1]["version"] < last:
            events.append(stalled.line.event())
        checker = stalled.checker
        planned = {entry[2]: entry for entry in stalled.plan}
        held_version = stalled.plan[0][2]
        jumps = 0
        for raw, event in events:
            version = event["version"]
            assert version > held_version and version in planned, "versions in order: %d after %d" % (version, held_version)
            if event["event"] == "changeset" and event["from"] == held_version and planned[version][1] == held_version:
                checker.check(event, planned[version])  # an event queued before it fell behind, marks and all
            else:  # the catch-up: from its last view to the current one, no marks (or a snapshot)
                jumps += 1
                _, _, _, view, meta, _ = planned[version]
                previous = checker.held
                if event["event"] == "changeset":
                    assert event["from"] == held_version, "the catch-up should come from %d, the version last sent" % held_version
                checker.check(event, (event["event"], held_version, version, view, meta, M.window_changeset(previous, view)))
            held_version = version
        assert jumps == 1 and events[-1][1]["version"] == last, "one catch-up: %s" % [
            (e.get("from"), e["version"]) for _, e in events]
        if history > last:
            assert events[-1][1]["event"] == "changeset", "history reaches back, yet the catch-up is a snapshot"
        assert len(events) < len(stalled.plan) - 1, "the stalled subscriber never fell behind"
        stats = ok(writer.request({"op": "stats"}), "stats")
        assert stats["catch_ups"] >= 1
        assert stalled.plan[-1][2] == last  # every write changed the view: the plan's last event is the current version
        stalled.checked = len(stalled.plan)  # the catch-up stood for the rest of the plan
        # and on from there: the next version that changes its view comes from the catch-up's
        finish(feed, [stalled, reader], {"op": "insert_items", "before": feed.item_ids()[0], "items": ["after"]})


def test_a_window_op_while_behind_is_answered_after_the_catch_up_to_the_new_view(tmp_path):
    """SPEC "Windows": before the `window` response the subscriber gets one changeset from its last
    event's version and view to the new window's view at that version."""
    arguments = ["--max-unsent-bytes", "1024", "--history-versions", "4096"]
    with Daemon(binary("diffcastd"), arguments, directory=str(tmp_path)) as daemon:
        writer = Line(daemon.socket_path)
        feed = Feed(writer, "wall")
        feed.write({"op": "apply", "sections": [{"id": "s", "items": [{"id": "i%d" % k, "data": k} for k in range(20)]},
                                                {"id": "t", "items": ["j%d" % k for k in range(10)]}]})
        stalled = Watch(feed, "stalled", {"first": 10}, Line(daemon.socket_path)).subscribe()
        reader = Watch(feed, "reader", {"first": 10}, Line(daemon.socket_path)).subscribe()
        stalled.drain()
        flood(feed, reader, random.Random(6))
        reader.drain()
        new = {"anchor": feed.item_ids()[-3], "before": 2, "after": 1}
        stalled.line.send({"op": "window", "collection": "wall", "window": new})
        events = []
        while True:
            raw = stalled.line.read_line()
            message = json.loads(raw)
            if "event" not in message:
                break
            events.append(message)
        assert ok(message, "window")["version"] == feed.version
        planned = {entry[2]: entry for entry in stalled.plan}
        held_version, checker = stalled.plan[0][2], stalled.checker
        for event in events[:-1]:  # what was queued before it fell behind
            checker.check(event, planned[event["version"]])
            held_version = event["version"]
        assert len(events) < len(stalled.plan) - 1, "the stalled subscriber never fell behind"
        view, meta = M.WindowModel(new, feed.state).view(feed.state)
        catch_up = events[-1]
        assert catch_up["event"] == "changeset", "history reaches back, yet the catch-up is a snapshot"
        checker.check(catch_up, ("changeset", held_version, feed.version, view, meta, M.window_changeset(checker.held, view)))
        assert meta["anchor"] == new["anchor"] and [s[0] for s in view] == ["t"]
        # then on under the new window, from the version of the catch-up
        stalled.window, stalled.win, stalled.view = new, M.WindowModel(new, feed.state), view
        stalled.plan.append(("changeset", held_version, feed.version, view, meta, None))
        stalled.checked = len(stalled.plan)
        finish(feed, [stalled], {"op": "update_items", "items": [{"id": new["anchor"], "data": "last"}]})

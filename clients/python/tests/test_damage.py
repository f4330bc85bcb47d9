"""Damaged events: whatever is wrong with one, the mirror raises ``Divergence`` and stays as it
was. Hand-made cases (digests from a separate reference written from SPEC.md), then a seeded
mutation run over a real daemon's events."""

import copy
import json
import random
import reprlib

import pytest

from diffcast import Divergence, Mirror, parse_preserving

P, B = (1 << 61) - 1, 1099511628211


def reference_digest(sections):
    """SPEC.md's digest over ``[(section id, data text, [(item id, data text)…])…]``."""
    total = 0
    for section_id, section_data, items in sections:
        for tag, ident, data in [("S", section_id, section_data)] + [("I", i, d) for i, d in items]:
            h = 0xCBF29CE484222325
            for byte in (tag + ident + "\n" + (data or "") + "\n").encode():
                h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
            total = (total * B + h % P) % P
    return "%016x" % total


BEFORE = [("s", None, [("a", '{"n":1}'), ("b", None)]), ("t", '{"title":"T"}', [("c", None)])]
AFTER = [("s", None, [("b", '{"n":2}'), ("x", None)]), ("t", '{"title":"T"}', [("c", None), ("a", '{"n":1}')])]


def snapshot():
    return {"event": "snapshot", "collection": "c", "epoch": "e1", "version": 1, "digest": reference_digest(BEFORE),
            "sections": [{"id": "s", "items": [{"id": "a", "data": {"n": 1}}, "b"]},
                         {"id": "t", "data": {"title": "T"}, "items": ["c"]}]}


def changeset():
    """BEFORE to AFTER: a moves to t, b gets data, x is inserted."""
    return {"event": "changeset", "collection": "c", "epoch": "e1", "from": 1, "version": 2, "digest": reference_digest(AFTER),
            "items": {"moved": [{"from": [0, 0], "to": [1, 1], "id": "a"}],
                      "inserted": [{"at": [0, 1], "id": "x"}],
                      "updated": [{"at": [0, 0], "id": "b", "data": {"n": 2}}]}}


def held(mirror):
    return mirror.version, mirror.epoch, mirror.digest(), mirror.items()


def assert_refused_and_unchanged(mirror, event):
    before = held(mirror)
    with pytest.raises(Divergence):
        mirror.feed(event)
    assert held(mirror) == before


def nested(depth):
    value = []
    for _ in range(depth):
        value = [value]
    return value


def test_the_hand_made_events_fit():
    mirror = Mirror()
    mirror.feed(snapshot())
    mirror.feed(changeset())
    assert mirror.digest() == reference_digest(AFTER)
    assert mirror.items() == [("s", [("b", {"n": 2}), ("x", None)]), ("t", [("c", None), ("a", {"n": 1})])]


@pytest.mark.parametrize("parse", [lambda text: parse_preserving(text), json.loads], ids=["raw numbers", "python ints"])
def test_two_inserts_at_the_largest_index_are_a_divergence(parse):
    mirror = Mirror()
    mirror.feed(snapshot())
    event = parse('{"event":"changeset","collection":"c","epoch":"e1","from":1,"version":2,"digest":"0000000000000000",'
                  '"items":{"inserted":[{"at":[0,9223372036854775807],"id":"x"},{"at":[0,9223372036854775807],"id":"y"}]}}')
    assert_refused_and_unchanged(mirror, event)
    assert mirror.feed(changeset()) == "changeset"


def damage(path, value):
    """A changeset with the value at ``path`` (keys and indices) replaced, or removed when
    ``value`` is ``DROP``."""
    def change():
        event = changeset()
        holder = event
        for key in path[:-1]:
            holder = holder[key]
        if value is DROP:
            del holder[path[-1]]
        else:
            holder[path[-1]] = value() if callable(value) else value
        return event
    return change


DROP = object()
MOVE = ("items", "moved", 0)
INSERT = ("items", "inserted", 0)
UPDATE = ("items", "updated", 0)

DAMAGED_CHANGESETS = {
    "insert past the end": damage(INSERT + ("at", 1), 3),
    "insert at a huge index": damage(INSERT + ("at", 1), 2 ** 63 - 1),
    "insert at a negative index": damage(INSERT + ("at", 1), -1),
    "insert into a section that is not there": damage(INSERT + ("at", 0), 2),
    "index as a string": damage(INSERT + ("at", 0), "0"),
    "index as a float": damage(INSERT + ("at", 0), 0.0),
    "index as infinity": damage(INSERT + ("at", 1), float("inf")),
    "index as a bool": damage(INSERT + ("at", 0), False),
    "index as null": damage(INSERT + ("at", 0), None),
    "index as a nested list": damage(INSERT + ("at", 0), [0]),
    "index of 5000 digits": damage(INSERT + ("at", 1), parse_preserving("1" * 5000)),
    "index as a raw float": damage(INSERT + ("at", 1), parse_preserving("1.0")),
    "index as a raw negative number": damage(INSERT + ("at", 1), parse_preserving("-1")),
    "path of one number": damage(INSERT + ("at",), [0]),
    "path of three numbers": damage(INSERT + ("at",), [0, 1, 0]),
    "path as an object": damage(INSERT + ("at",), {"0": 1}),
    "path nested very deep": damage(INSERT + ("at",), lambda: [nested(100000), 0]),
    "no path": damage(INSERT + ("at",), DROP),
    "no identifier": damage(INSERT + ("id",), DROP),
    "identifier null": damage(INSERT + ("id",), None),
    "identifier a float": damage(INSERT + ("id",), 1.5),
    "identifier a bool": damage(INSERT + ("id",), True),
    "identifier a list": damage(INSERT + ("id",), ["x"]),
    "identifier of 5000 digits": damage(INSERT + ("id",), 10 ** 5000),
    "an inserted identifier already there": damage(INSERT + ("id",), "c"),
    "data nested very deep": damage(INSERT + ("data",), lambda: nested(100000)),
    "data that is not JSON": damage(INSERT + ("data",), {1, 2}),
    "entry not an object": damage(INSERT, "x"),
    "entry null": damage(INSERT, None),
    "list not a list": damage(("items", "inserted"), {"at": [0, 1], "id": "x"}),
    "items not an object": damage(("items",), [1, 2]),
    "sections not an object": damage(("sections",), "s"),
    "move of an unknown identifier": damage(MOVE + ("id",), "ghost"),
    "move from a place that holds another item": damage(MOVE + ("from", 1), 1),
    "move from a huge index": damage(MOVE + ("from", 1), 2 ** 64),
    "move to a huge index": damage(MOVE + ("to", 1), 9223372036854775807),
    "move without a target": damage(MOVE + ("to",), DROP),
    "update past the end": damage(UPDATE + ("at", 1), 7),
    "update of another item": damage(UPDATE + ("id",), "x"),
    "from null": damage(("from",), None),
    "from as a string": damage(("from",), "1"),
    "from as a list": damage(("from",), [1]),
    "version past 64 bits": damage(("version",), 2 ** 64),
    "version negative": damage(("version",), -1),
    "version before from": damage(("version",), 0),
    "version as a float": damage(("version",), 2.0),
    "another epoch": damage(("epoch",), "e2"),
    "digest as a number": damage(("digest",), 0),
}


@pytest.mark.parametrize("make", DAMAGED_CHANGESETS.values(), ids=DAMAGED_CHANGESETS.keys())
def test_a_damaged_changeset_is_a_divergence_and_changes_nothing(make):
    mirror = Mirror()
    mirror.feed(snapshot())
    assert_refused_and_unchanged(mirror, make())
    assert mirror.feed(changeset()) == "changeset" and mirror.digest() == reference_digest(AFTER)


def test_duplicates_and_unknown_moves_are_refused_even_with_the_right_digest():
    cases = [
        # x inserted twice, the digest of the state that holds it twice
        dict(damage(("items", "inserted"), [{"at": [0, 1], "id": "x"}, {"at": [1, 2], "id": "x"}])(), digest=reference_digest(
            AFTER[:1] + [("t", '{"title":"T"}', [("c", None), ("a", '{"n":1}'), ("x", None)])])),
        # c inserted though it is there: the digest of [b, c] + [c, a]
        dict(damage(INSERT + ("id",), "c")(), digest=reference_digest(
            [("s", None, [("b", '{"n":2}'), ("c", None)]), ("t", '{"title":"T"}', [("c", None), ("a", '{"n":1}')])])),
        # the same move listed twice
        damage(("items", "moved"), [{"from": [0, 0], "to": [1, 1], "id": "a"}] * 2)(),
        # the same deletion listed twice
        dict(changeset(), items={"deleted": [{"at": [0, 1], "id": "b"}] * 2}, digest=reference_digest(
            [("s", None, [("a", '{"n":1}')]), ("t", '{"title":"T"}', [("c", None)])])),
        # a section inserted under an identifier that is there
        dict(changeset(), items={}, sections={"inserted": [{"index": 2, "id": "s"}]},
             digest=reference_digest(BEFORE + [("s", None, [])])),
        # two sections arrive at one index
        dict(changeset(), items={}, sections={"inserted": [{"index": 2, "id": "u"}, {"index": 2, "id": "v"}]},
             digest=reference_digest(BEFORE + [("v", None, []), ("u", None, [])])),
        # a section deleted twice
        dict(changeset(), items={}, sections={"deleted": [{"index": 1, "id": "t"}] * 2}, digest=reference_digest(BEFORE[:1])),
        # a section move whose target is missing
        dict(changeset(), items={}, sections={"moved": [{"from": 1, "id": "t"}]}),
        # a reload of an item that is not there
        dict(changeset(), items={"reloaded": [{"at": [0, 5], "id": "a"}]}, digest=reference_digest(BEFORE)),
    ]
    for event in cases:
        mirror = Mirror()
        mirror.feed(snapshot())
        assert_refused_and_unchanged(mirror, event)
        assert mirror.feed(changeset()) == "changeset"


DAMAGED_SNAPSHOTS = {
    "not an object": None,
    "a list": [],
    "a string": "snapshot",
    "no kind": {"event": None},
    "kind a list": {"event": ["snapshot"]},
    "sections a string": dict(snapshot(), sections="s"),
    "sections null": dict(snapshot(), sections=None),
    "a section without identifier": dict(snapshot(), sections=[{"items": []}]),
    "items a string": dict(snapshot(), sections=[{"id": "s", "items": "a"}]),
    "an item without identifier": dict(snapshot(), sections=[{"id": "s", "items": [{"data": 1}]}]),
    "an item null": dict(snapshot(), sections=[{"id": "s", "items": [None]}]),
    "version negative": dict(snapshot(), version=-1),
    "version a string": dict(snapshot(), version="1"),
    "no version": {k: v for k, v in snapshot().items() if k != "version"},
    "epoch null": dict(snapshot(), epoch=None),
    "epoch a number": dict(snapshot(), epoch=7),
    # duplicates, each with the digest of what it lists
    "an item twice": dict(snapshot(), sections=[{"id": "s", "items": ["a", "a"]}],
                          digest=reference_digest([("s", None, [("a", None), ("a", None)])])),
    "an item twice across sections": dict(snapshot(), sections=[{"id": "s", "items": [1]}, {"id": "t", "items": ["1"]}],
                                          digest=reference_digest([("s", None, [("1", None)]), ("t", None, [("1", None)])])),
    "a section twice": dict(snapshot(), sections=[{"id": "s"}, {"id": "s"}],
                            digest=reference_digest([("s", None, []), ("s", None, [])])),
}


@pytest.mark.parametrize("event", DAMAGED_SNAPSHOTS.values(), ids=DAMAGED_SNAPSHOTS.keys())
def test_a_damaged_snapshot_is_a_divergence_and_changes_nothing(event):
    mirror = Mirror()
    mirror.feed(snapshot())
    assert_refused_and_unchanged(mirror, event)
    assert mirror.feed(changeset()) == "changeset"


# The mutation run: real events, damaged at random.

def recorded_events(daemon):
    """What a subscriber of a real daemon receives over writes of every kind, parsed as the client
    parses a line: the snapshot, then one changeset per write."""
    reader, writer = daemon.client(), daemon.client()
    writer.apply("c", [{"id": "s1", "items": [{"id": "a", "data": {"n": 1}}, "b", "c"]},
                       {"id": "s2", "data": {"title": "two"}, "items": ["d", "e"]}, {"id": "s3"}])
    reader.subscribe("c")
    writes = [
        ("append_items", {"items": ["f", {"id": "g", "data": [1, {"k": None}]}], "section": "s2"}),
        ("move_item", {"item": "a", "after": "e"}),
        ("update_items", {"items": [{"id": "b", "data": {"n": 2}}]}),
        ("reload_items", {"items": ["c"]}),
        ("reload_sections", {"sections": ["s1"]}),
        ("move_section", {"section": "s3", "before": "s1"}),
        ("insert_sections", {"sections": [{"id": "s0", "items": ["h", 12]}], "after": "s3"}),
        ("delete_items", {"items": ["d"]}),
        ("reconfigure_items", {"items": ["b"]}),
        ("update_sections", {"sections": [{"id": "s1", "data": {"title": "one"}}]}),
        ("apply", {"sections": [{"id": "s2", "items": ["g", "c", "a"]}, {"id": "s1", "items": ["h", "e", "b", "i"]},
                                {"id": "s4"}]}),
        ("delete_sections", {"sections": ["s2"]}),
        ("batch", {"ops": [{"op": "append_items", "items": ["j", "k"]}, {"op": "move_item", "item": "k", "before": "h"},
                           {"op": "append_sections", "sections": [{"id": "s5", "items": ["l"]}]}]}),
        ("apply", {"sections": [{"id": "s5", "items": ["k", "l", "b"]}, {"id": "s1", "items": ["j", "h", "e"]}]}),
    ]
    for op, arguments in writes:
        version = writer.request(op, "c", **arguments)["version"]
    events = []
    for event in reader.events(timeout=5):
        events.append(parse_preserving(json.dumps(event)))
        if event["version"] == version:
            return events
    raise AssertionError("the events stopped at %s" % events[-1]["version"])


def slots(event):
    """(container, key) of every value in the event, to a bounded depth."""
    found, pending = [], [(event, 0)]
    while pending:
        value, depth = pending.pop()
        keys = value.keys() if isinstance(value, dict) else range(len(value)) if isinstance(value, list) else ()
        for key in keys:
            found.append((value, key))
            if depth < 8:
                pending.append((value[key], depth + 1))
    return found


def replacements(value, rng, identifiers):
    """What a damaged value might become."""
    number = value if isinstance(value, int) else int(value) if isinstance(value, str) and value.isdigit() else None
    near = [number + d for d in (-2, -1, 1, 2)] if number is not None else []
    return near + [rng.choice(near + [0, 1])] * 2 + [
        2 ** 63 - 1, 2 ** 63, 2 ** 64, -1, -(2 ** 63), 10 ** 30, 1.5, -0.0, float("inf"), float("nan"), True, False, None,
        "0", "", "x", rng.choice(identifiers), rng.choice(identifiers), [], [0], [0, 0], [[0, 0]], [0, 0, 0], {}, {"id": "a"},
        parse_preserving("9223372036854775807"), parse_preserving("-1"), parse_preserving("1e400"), parse_preserving("2.0"),
        parse_preserving("-0"), parse_preserving("18446744073709551616"), nested(3),
    ]


def damaged(event, rng, identifiers):
    """A copy of the event with one to three values changed, keys dropped or list entries
    duplicated, dropped or swapped."""
    event = copy.deepcopy(event)
    for _ in range(rng.randint(1, 3)):
        container, key = rng.choice(slots(event))
        value, roll = container[key], rng.random()
        if isinstance(value, list) and value and roll < 0.4:
            entry = rng.randrange(len(value))
            if roll < 0.2:
                value.insert(rng.randrange(len(value) + 1), copy.deepcopy(value[entry]))
            elif roll < 0.3:
                del value[entry]
            else:
                other = rng.randrange(len(value))
                value[entry], value[other] = value[other], value[entry]
        elif isinstance(container, dict) and roll < 0.55:
            del container[key]
        else:
            container[key] = rng.choice(replacements(value, rng, identifiers))
    return event


def test_randomly_damaged_real_events_only_ever_diverge(daemon):
    events = recorded_events(daemon)
    assert len(events) > 10 and all(event["event"] == "changeset" for event in events[1:])
    kinds = {(part, kind) for event in events[1:] for part in ("sections", "items") for kind in event.get(part, {})}
    assert len(kinds) == 10, "the writes should bring every kind of change: %s" % sorted(kinds)
    bases, mirror = [Mirror()], Mirror()
    for event in events:
        mirror.feed(event)
        bases.append(copy.deepcopy(mirror))
    identifiers = sorted({item_id for base in bases for _, items in base.items() for item_id, _ in items})
    rng = random.Random(20240611)
    outcomes = {"diverged": 0, "applied": 0}
    for _ in range(3000):
        k = rng.randrange(len(events))
        event = damaged(events[k], rng, identifiers)
        mirror = copy.deepcopy(bases[k])
        try:
            mirror.feed(event)
        except Divergence:
            outcomes["diverged"] += 1
            assert held(mirror) == held(bases[k]), reprlib.repr(event)
            mirror.feed(events[k])  # still able to take the real event: nothing half-applied
        else:
            outcomes["applied"] += 1  # harmless damage (a key it ignores, a duplicated mark…)
        assert mirror.items() == bases[k + 1].items() and mirror.digest() == bases[k + 1].digest(), reprlib.repr(event)
    assert outcomes["diverged"] > 2000 and outcomes["applied"] > 0, outcomes

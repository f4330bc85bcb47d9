"""The mirror against golden vectors computed elsewhere (Tests/Vectors/golden.json, from
shared/conformance/model.py, read by the Swift and JavaScript suites too) and against hand-made
events."""

import json
import pathlib

import pytest

from diffcast import Divergence, Mirror, canonical, parse_preserving

# Tests/Vectors/golden.json: computed by ../shared/conformance/model.py, read by every suite.
VECTORS = json.loads(
    (pathlib.Path(__file__).resolve().parents[3] / "Tests" / "Vectors" / "golden.json").read_text(encoding="utf-8")
)
GOLDEN = [
    ([("s", None, [])], "0d06942505776bf8"),
    ([("s", None, [("a", None), ("b", None)])], "1ae354cda546efbc"),
    ([("s", None, [("a", '{"likes":5}'), ("b", None)])], "1ec6a85a4fdcadd2"),
]


def snapshot_event(sections, digest, version=1):
    wire = []
    for sid, data, items in sections:
        section = {"id": sid, "items": [{"id": i, "data": parse_preserving(d)} if d else i for i, d in items]}
        if data:
            section["data"] = parse_preserving(data)
        wire.append(section)
    return {"event": "snapshot", "collection": "c", "epoch": "e", "version": version, "sections": wire, "digest": digest}


def test_the_golden_vectors_are_there():
    assert len(VECTORS["digests"]) >= 10 and len(VECTORS["changesets"]) >= 10
    for sections, digest in GOLDEN:
        assert any(v["digest"] == digest for v in VECTORS["digests"])


@pytest.mark.parametrize("vector", VECTORS["digests"], ids=lambda v: v["name"])
def test_golden_digests(vector):
    mirror = Mirror()
    assert mirror.feed(parse_preserving(vector["snapshot"])) == "snapshot"
    assert mirror.digest() == vector["digest"]


def plain(sections):
    """Wire sections as (id, data text, [(id, data text)…]), data in canonical form."""
    text = lambda value: None if value is None else canonical(value)
    return [
        (s["id"], text(s.get("data")), [(i, None) if isinstance(i, str) else (i["id"], text(i.get("data"))) for i in s["items"]])
        for s in sections
    ]


@pytest.mark.parametrize("vector", VECTORS["changesets"], ids=lambda v: v["name"])
def test_golden_changesets(vector):
    mirror = Mirror()
    mirror.feed(parse_preserving(vector["snapshot"]))
    assert mirror.feed(parse_preserving(vector["changeset"])) == "changeset"
    held = [(s.id, s.data_text, [(i.id, i.data_text) for i in s.items]) for s in mirror.sections]
    assert held == plain(parse_preserving(vector["sections"]))
    assert mirror.digest() == vector["digest"]
    # The compact form of the same changeset (a page's ?compact=1 stream) leads to the same target.
    compact = Mirror()
    compact.feed(parse_preserving(vector["snapshot"]))
    assert compact.feed(parse_preserving(vector["compact_changeset"])) == "changeset"
    assert [(s.id, s.data_text, [(i.id, i.data_text) for i in s.items]) for s in compact.sections] == held
    assert (compact.version, compact.epoch, compact.digest()) == (2, "e", vector["digest"])


def test_a_wrong_digest_is_a_divergence_and_changes_nothing():
    mirror = Mirror()
    mirror.feed(snapshot_event(GOLDEN[1][0], GOLDEN[1][1]))
    with pytest.raises(Divergence):
        mirror.feed(snapshot_event(GOLDEN[2][0], GOLDEN[1][1], version=2))
    assert mirror.version == 1 and mirror.digest() == GOLDEN[1][1]


def test_numbers_keep_their_text():
    value = parse_preserving('{"a":1.0,"b":1e5,"c":-0,"d":[1.50]}')
    assert canonical(value) == '{"a":1.0,"b":1e5,"c":-0,"d":[1.50]}'
    assert canonical({"s": 'quote " back \\ nl \n tab \t ctl \x01 é'}) == '{"s":"quote \\" back \\\\ nl \\n tab \\t ctl \\u0001 é"}'


def test_a_changeset_applies_with_the_protocols_steps():
    mirror = Mirror()
    mirror.feed(snapshot_event([("s", None, [("a", None), ("b", None)])], "1ae354cda546efbc"))
    # a gets data 5: the golden state "items with data".
    change = {"event": "changeset", "collection": "c", "from": 1, "version": 2, "digest": "1ec6a85a4fdcadd2",
              "items": {"updated": [{"at": [0, 0], "id": "a", "data": parse_preserving('{"likes":5}')}]}}
    assert mirror.feed(change) == "changeset"
    assert mirror.items() == [("s", [("a", {"likes": 5}), ("b", None)])]
    # a chain gap is refused
    with pytest.raises(Divergence):
        mirror.feed(dict(change, **{"from": 5, "version": 6}))
    # a deletion naming the wrong identifier is refused, the mirror unchanged
    wrong = {"event": "changeset", "collection": "c", "from": 2, "version": 3, "digest": "0d06942505776bf8",
             "items": {"deleted": [{"at": [0, 0], "id": "b"}]}}
    with pytest.raises(Divergence):
        mirror.feed(wrong)
    assert mirror.version == 2 and mirror.digest() == "1ec6a85a4fdcadd2"

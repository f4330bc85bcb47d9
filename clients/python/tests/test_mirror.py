"""The mirror against golden digests computed elsewhere (shared/conformance/model.py, the same
values the Swift suite pins) and against hand-made events."""

import pytest

from diffcast import Divergence, Mirror, canonical, parse_preserving

GOLDEN = [
    ([], "0000000000000000"),
    ([("s", None, [])], "0d06942505776bf8"),
    ([("s", '{"title":"News"}', [])], "167a198804d646e3"),
    ([("s", None, [("a", None), ("b", None)])], "1ae354cda546efbc"),
    ([("s", None, [("a", '{"likes":5}'), ("b", None)])], "1ec6a85a4fdcadd2"),
    ([("s", None, [("a", '{"likes":6}'), ("b", None)])], "10197177aee5d9a8"),
    ([("s", None, [("e\u0301", None)])], "055e0a56333ad0c8"),
    ([("s", None, [("\u00e9", None)])], "16f374f2eb67b5e5"),
    ([("s1", None, []), ("s2", None, [])], "0abae6dc6ea86efd"),
]


def snapshot_event(sections, digest, version=1):
    wire = []
    for sid, data, items in sections:
        section = {"id": sid, "items": [{"id": i, "data": parse_preserving(d)} if d else i for i, d in items]}
        if data:
            section["data"] = parse_preserving(data)
        wire.append(section)
    return {"event": "snapshot", "collection": "c", "epoch": "e", "version": version, "sections": wire, "digest": digest}


@pytest.mark.parametrize("sections,digest", GOLDEN)
def test_golden_digests(sections, digest):
    mirror = Mirror()
    assert mirror.feed(snapshot_event(sections, digest)) == "snapshot"
    assert mirror.digest() == digest


def test_a_wrong_digest_is_a_divergence_and_changes_nothing():
    mirror = Mirror()
    mirror.feed(snapshot_event(GOLDEN[3][0], GOLDEN[3][1]))
    with pytest.raises(Divergence):
        mirror.feed(snapshot_event(GOLDEN[4][0], GOLDEN[3][1], version=2))
    assert mirror.version == 1 and mirror.digest() == GOLDEN[3][1]


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

#!/usr/bin/env python3
"""Writes Tests/Vectors/golden.json: digests and changesets computed by the shared conformance
model (../shared/conformance/model.py), not by Diffcast's own code, for the Swift, Python and
JavaScript suites to check their digests and mirrors against.

    python3 scripts/golden-vectors.py [--model ../shared/conformance/model.py]

Each digest vector is a snapshot event line (the clients parse it themselves, so numbers keep
their text) and the digest the model computes for it. Each changeset vector is a snapshot event,
the changeset event the model's reference diff makes from it to a target state, and the target:
applying the one to the other must give the target's sections and digest.
"""

import argparse
import importlib.util
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def load_model(path):
    spec = importlib.util.spec_from_file_location("model", path)
    model = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(model)
    return model


# Snapshots as the wire writes their sections (text, so that numbers keep their form).
DIGESTS = [
    ("empty", "[]"),
    ("one empty section", '[{"id":"s","items":[]}]'),
    ("a section with data", '[{"id":"s","data":{"title":"News"},"items":[]}]'),
    ("items without data", '[{"id":"s","items":["a","b"]}]'),
    ("items with data", '[{"id":"s","items":[{"id":"a","data":{"likes":5}},"b"]}]'),
    ("the same with one data change", '[{"id":"s","items":[{"id":"a","data":{"likes":6}},"b"]}]'),
    ("NFD e + U+0301", '[{"id":"s","items":["e\\u0301"]}]'),
    ("NFC U+00E9", '[{"id":"s","items":["\\u00e9"]}]'),
    ("two sections without items", '[{"id":"s1","items":[]},{"id":"s2","items":[]}]'),
    ("order swapped", '[{"id":"s","items":["b",{"id":"a","data":{"likes":5}}]}]'),
    (
        "numbers and strings",
        '[{"id":"s","data":1.0,"items":[{"id":"7","data":"x"},{"id":"0","data":[1,"\\u00e9",null,true]}]}]',
    ),
    ("data null is no data", '[{"id":"s","data":null,"items":[{"id":"a","data":null}]}]'),
]

# (name, from, to): sections as Python values.
CHANGESETS = [
    ("an item appended", [["s", None, ["a", "b"]]], [["s", None, ["a", "b", "c"]]]),
    ("an item deleted", [["s", None, ["a", "b", "c"]]], [["s", None, ["a", "c"]]]),
    ("an item moved down", [["s", None, ["a", "b", "c", "d"]]], [["s", None, ["b", "c", "a", "d"]]]),
    (
        "an item moved to another section",
        [["s1", None, ["a", "b"]], ["s2", None, ["c"]]],
        [["s1", None, ["b"]], ["s2", None, ["c", "a"]]],
    ),
    ("an item's data changed", [["s", None, [("a", {"n": 1}), "b"]]], [["s", None, [("a", {"n": 2}), "b"]]]),
    ("an item's data removed", [["s", None, [("a", {"n": 1})]]], [["s", None, ["a"]]]),
    ("sections inserted and deleted", [["s1", None, ["a"]], ["s2", None, []]], [["s0", {"t": 0}, ["z"]], ["s1", None, ["a"]]]),
    (
        "sections swapped, with their items",
        [["s1", None, ["a"]], ["s2", None, ["b"]], ["s3", None, []]],
        [["s3", None, []], ["s2", None, ["b"]], ["s1", None, ["a"]]],
    ),
    ("a section's data changed", [["s", {"title": "Old"}, ["a"]]], [["s", {"title": "New"}, ["a"]]]),
    (
        "everything at once",
        [["s1", None, ["a", ("b", 1), "c"]], ["s2", {"x": 1}, ["d", "e"]], ["s3", None, ["f"]]],
        [["s2", {"x": 2}, ["e", "c", "d", "g"]], ["s1", None, [("b", 2), "h"]], ["s4", None, ["a"]]],
    ),
    ("emptied", [["s1", None, ["a"]], ["s2", None, []]], []),
]


def wire_state(sections):
    state = []
    for sid, sdata, items in sections:
        state.append([sid, sdata, [[i, None] if isinstance(i, str) else [i[0], i[1]] for i in items]])
    return state


def compact(value):
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def snapshot_line(model, sections_text):
    state = model.state_from_wire(json.loads(sections_text))
    digest = model.digest(state)
    line = (
        '{"event":"snapshot","collection":"golden","epoch":"e","version":1,"sections":'
        + sections_text
        + ',"digest":"'
        + digest
        + '"}'
    )
    return line, digest


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=os.path.join(ROOT, "..", "shared", "conformance", "model.py"))
    args = parser.parse_args()
    model = load_model(args.model)
    vectors = {
        "about": "Computed by ../shared/conformance/model.py through scripts/golden-vectors.py; do not edit by hand.",
        "digests": [],
        "changesets": [],
    }
    for name, text in DIGESTS:
        line, digest = snapshot_line(model, text)
        vectors["digests"].append({"name": name, "snapshot": line, "digest": digest})
    for name, old, new in CHANGESETS:
        old_state, new_state = wire_state(old), wire_state(new)
        line, _ = snapshot_line(model, compact(model.state_to_wire(old_state)))
        changes = model.reference_diff(old_state, new_state)
        # The model's own mirror must take it there, or the vector would be wrong.
        applied = model.apply_changeset(old_state, changes)
        same, difference = model.same_state(applied, new_state)
        if not same:
            raise SystemExit(f"{name}: the model's changeset does not lead to the target: {difference}")
        digest = model.digest(new_state)
        event = {"event": "changeset", "collection": "golden", "epoch": "e", "from": 1, "version": 2}
        event.update({key: value for key, value in changes.items() if value})
        event["digest"] = digest
        vectors["changesets"].append(
            {
                "name": name,
                "snapshot": line,
                "changeset": compact(event),
                # As a compact event stream sends it (?compact=1): without what the stream
                # established (CompactEvents.swift).
                "compact_changeset": compact(
                    {key: value for key, value in event.items() if key not in ("collection", "epoch", "from")}
                ),
                "sections": compact(model.state_to_wire(new_state)),
                "digest": digest,
            }
        )
    path = os.path.join(ROOT, "Tests", "Vectors", "golden.json")
    with open(path, "w", encoding="utf-8") as out:
        json.dump(vectors, out, ensure_ascii=False, indent=1)
        out.write("\n")
    print(f"wrote {path}: {len(vectors['digests'])} digests, {len(vectors['changesets'])} changesets")


if __name__ == "__main__":
    main()

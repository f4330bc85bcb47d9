// The JavaScript mirror against the real daemon (node --test): random writes of every op, each
// event applied by the mirror with its digest checked, and the state compared with `get`; the
// golden vectors of Tests/Vectors/golden.json; damaged events are divergences that change nothing.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { Mirror, Divergence, parseEvent, digest, fnv1a64, applyChangeset } from "../diffcast.js";
import { LineClient, withDaemon, generator } from "./support.mjs";

// Tests/Vectors/golden.json: computed by ../shared/conformance/model.py, read by every suite.
const vectors = JSON.parse(readFileSync(new URL("../../../Tests/Vectors/golden.json", import.meta.url), "utf8"));

test("golden digests match the model's", () => {
  assert.ok(vectors.digests.length >= 10);
  for (const vector of vectors.digests) {
    const mirror = new Mirror();
    assert.equal(mirror.apply(parseEvent(vector.snapshot)).kind, "snapshot", vector.name);
    assert.equal(mirror.digest, vector.digest, vector.name);
    assert.equal(digest(mirror.sections), vector.digest, vector.name);
  }
  // FNV-1a 64 of "a" (the published test vector).
  assert.equal(fnv1a64("a"), 0xaf63dc4c8601ec8cn);
});

test("golden changesets lead to the model's target", () => {
  assert.ok(vectors.changesets.length >= 10);
  for (const vector of vectors.changesets) {
    const mirror = new Mirror();
    mirror.apply(parseEvent(vector.snapshot));
    assert.equal(mirror.apply(parseEvent(vector.changeset)).kind, "changeset", vector.name);
    assert.equal(mirror.digest, vector.digest, vector.name);
    const target = new Mirror();
    target.apply(
      parseEvent(
        `{"event":"snapshot","collection":"golden","epoch":"e","version":2,"sections":${vector.sections},"digest":"${vector.digest}"}`,
      ),
    );
    assert.deepEqual(mirror.sections, target.sections, vector.name);
    // The compact form of the same changeset (a ?compact=1 stream) leads to the same target.
    const compact = new Mirror();
    compact.apply(parseEvent(vector.snapshot));
    const update = compact.apply(parseEvent(vector.compact_changeset));
    assert.equal(update.kind, "changeset", vector.name);
    // What the stream left out is filled in from the mirror: the changeset reads as the full one.
    assert.deepEqual(
      [update.changeset.epoch, update.changeset.from, update.changeset.version],
      [JSON.parse(vector.changeset).epoch, JSON.parse(vector.changeset).from, 2],
      vector.name,
    );
    assert.deepEqual(compact.sections, target.sections, vector.name);
    assert.deepEqual([compact.version, compact.epoch, compact.digest], [2, "e", vector.digest], vector.name);
  }
});

test("every event of random writes of every op is applied and verified", async () => {
  await withDaemon(async (socketPath) => {
    const writer = new LineClient(socketPath);
    const subscriber = new LineClient(socketPath);
    await subscriber.request("subscribe r");
    const mirror = new Mirror();
    mirror.apply(parseEvent(await subscriber.event()));
    const random = generator(42);
    const item = () => `i${random(30)}`;
    const section = () => `s${random(4)}`;
    let applied = 0;
    for (let step = 0; step < 400; step += 1) {
      const data = JSON.stringify({ n: step, text: "é\u0301 \"q\"", list: [1.0, 2.50, -0] }).replace("1,", "1.0,");
      const lines = [
        `append_sections r {"sections":[{"id":"${section()}","data":${data}}]}`,
        `append_items r {"section":"${section()}","items":[{"id":"${item()}","data":${data}}]}`,
        `insert_items r {"items":["${item()}"],"before":"${item()}"}`,
        `delete_items r {"items":["${item()}"]}`,
        `move_item r {"item":"${item()}","after":"${item()}"}`,
        `update_items r {"items":[{"id":"${item()}","data":${data}}]}`,
        `reload_items r {"items":["${item()}"]}`,
        `reconfigure_items r {"items":["${item()}"]}`,
        `move_section r {"section":"${section()}","before":"${section()}"}`,
        `update_sections r {"sections":[{"id":"${section()}","data":{"title":${step}}}]}`,
        `delete_sections r {"sections":["${section()}"]}`,
        `apply r {"sections":[{"id":"s1","items":["${item()}","${item()}"]},{"id":"s2"}]}`,
      ];
      const answer = await writer.request(lines[random(lines.length)]);
      if (!answer.ok) continue;
      while (mirror.version < answer.version) {
        const update = mirror.apply(parseEvent(await subscriber.event()));
        assert.equal(update.kind, "changeset");
        applied += 1;
      }
    }
    // The state as `get` writes it (data as the daemon's text), read as a snapshot.
    const stateText = await writer.requestText("get r");
    const state = JSON.parse(stateText);
    assert.equal(mirror.version, state.version);
    const plain = (sections) =>
      sections.map((s) => ({ id: s.id, data: s.data ? s.data.text : null, items: s.items.map((i) => [i.id, i.data ? i.data.text : null]) }));
    const got = parseEvent(stateText.replace('{"ok":true,"op":"get",', '{"event":"snapshot",'));
    const reference = new Mirror();
    reference.apply(got);
    assert.deepEqual(plain(mirror.sections), plain(reference.sections));
    assert.ok(applied > 100, `only ${applied} changesets`);
    writer.close();
    subscriber.close();
  });
});

test("data keeps the daemon's text: 1.0 stays 1.0 and the digest holds", () => {
  const event = parseEvent('{"event":"snapshot","collection":"c","epoch":"e","version":1,"sections":[{"id":"s","items":[{"id":"a","data":{"x":1.0,"y":"}\\""}}]}],"digest":"x"}');
  assert.equal(event.sections[0].items[0].data.text, '{"x":1.0,"y":"}\\""}');
  assert.equal(event.sections[0].items[0].data.value.y, '}"');
});

test("a changeset off the chain or of another epoch is a divergence, even with the right digest", () => {
  const snapshot = '{"event":"snapshot","collection":"m","epoch":"e","version":1,"sections":[{"id":"s","items":["a","b"]}],"digest":"1ae354cda546efbc"}';
  // Appends c: the digest of [a, b, c] (golden vector "an item appended").
  const changeset = (head) =>
    `{"event":"changeset",${head}"version":2,"items":{"inserted":[{"at":[0,2],"id":"c"}]},"digest":"1c908a185eb97cc0"}`;
  for (const head of ['"collection":"m","epoch":"e","from":2,', '"collection":"m","epoch":"f","from":1,', '"from":0,', '"epoch":"f",']) {
    const mirror = new Mirror();
    mirror.apply(parseEvent(snapshot));
    assert.throws(() => mirror.apply(parseEvent(changeset(head))), Divergence, head);
    assert.deepEqual([mirror.version, mirror.epoch, mirror.digest], [1, "e", "1ae354cda546efbc"], head);
  }
  // The same changeset on the chain applies, in full and compact.
  for (const head of ['"collection":"m","epoch":"e","from":1,', ""]) {
    const mirror = new Mirror();
    mirror.apply(parseEvent(snapshot));
    assert.equal(mirror.apply(parseEvent(changeset(head))).kind, "changeset", head);
    assert.deepEqual([mirror.version, mirror.epoch, mirror.digest], [2, "e", "1c908a185eb97cc0"], head);
  }
});

test("a damaged changeset is a divergence and changes nothing", () => {
  const mirror = new Mirror();
  mirror.apply(parseEvent('{"event":"snapshot","collection":"m","epoch":"e","version":1,"sections":[{"id":"s","items":["a","b"]}],"digest":"1ae354cda546efbc"}'));
  const before = JSON.stringify(mirror.sections);
  const damaged = [
    '{"items":{"inserted":[{"at":[0,9223372036854775807],"id":"x"},{"at":[0,9223372036854775807],"id":"y"}]}}',
    '{"items":{"inserted":[{"at":[0,-1],"id":"x"}]}}',
    '{"items":{"inserted":[{"at":[7,0],"id":"x"}]}}',
    '{"items":{"deleted":[{"at":[0,0],"id":"b"}]}}',
    '{"items":{"deleted":[{"at":[0,0],"id":"a"},{"at":[0,0],"id":"a"}]}}',
    '{"items":{"moved":[{"from":[0,0],"to":[0,5],"id":"a"}]}}',
    '{"items":{"inserted":[{"at":[0,0],"id":"b"}]}}',
    '{"items":{"updated":[{"at":"zero","id":"a","data":1}]}}',
    '{"items":"nope"}',
    '{"sections":{"deleted":[{"index":0,"id":"t"}]}}',
    '{"items":{"inserted":[{"at":[0,2],"id":"c"}]}}',
  ];
  for (const body of damaged) {
    const line = `{"event":"changeset","collection":"m","epoch":"e","from":1,"version":2,${body.slice(1, -1)},"digest":"0000000000000000"}`;
    assert.throws(() => mirror.apply(parseEvent(line)), Divergence, body);
    assert.equal(JSON.stringify(mirror.sections), before, body);
    assert.equal(mirror.version, 1);
  }
  for (const line of ["", "{", '{"event":"changeset"', "[1,2]", '{"event":"snapshot","sections":[{"id":{}}]}', "nul"]) {
    assert.throws(() => mirror.apply(parseEvent(line)), Divergence, line);
  }
  assert.throws(() => applyChangeset(mirror.sections, { items: { reloaded: [{ at: [0, 3], id: "a" }] } }), Divergence);
});

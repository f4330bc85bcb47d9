// Windows (contract 3) in the JavaScript client, against the real daemon (node --test).
//
// Windowed mirrors (first, last, anchor, and one moved by the `window` op) follow random writes
// of every op: each event is applied and its view's digest checked, and each must bring exactly
// the view the reference model (SPEC.md "Windows"; shared/conformance/model.py's window_range,
// window_view and reanchor, here over the versions a whole-collection mirror sees) gives at its
// version, with its `window`; a subscriber gets an event exactly at the versions that change its
// view. Then `follow` over a WebSocket: moving the window, a refused move, the anchor following a
// deleted item, a lost connection and a divergence (subscribing again with the window, no since),
// a lost anchor, and moving between a window and the whole collection.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Mirror, parseEvent, follow, checkWindow, windowQuery } from "../diffcast.js";
import { LineClient, withDaemon, generator, until, TestWebSocket } from "./support.mjs";

// ---- the reference model, over plain states: [[sectionId, dataText, [[itemId, dataText]…]]…]

const plain = (sections) =>
  sections.map((s) => [s.id, s.data ? s.data.text : null, s.items.map((i) => [i.id, i.data ? i.data.text : null])]);
const itemIds = (state) => state.flatMap(([, , items]) => items.map(([id]) => id));

function windowRange(w, state, anchor) {
  const n = state.reduce((sum, [, , items]) => sum + items.length, 0);
  if ("first" in w) return [0, Math.min(w.first, n), n];
  if ("last" in w) return [Math.max(0, n - w.last), n, n];
  if (anchor === null) return [0, 0, n];
  const p = itemIds(state).indexOf(anchor);
  assert.ok(p >= 0, `the anchor ${anchor} is in the collection`);
  return [Math.max(0, p - w.before), Math.min(n, p + w.after + 1), n];
}

function windowView(state, lo, hi) {
  const n = state.reduce((sum, [, , items]) => sum + items.length, 0);
  const out = [];
  let k = 0;
  for (const [id, data, items] of state) {
    if (items.length) {
      const part = items.slice(Math.max(lo - k, 0), Math.max(hi - k, 0));
      if (part.length) out.push([id, data, part]);
    } else if ((lo < k && k < hi) || (k === lo && lo === 0) || (k === hi && hi === n)) {
      out.push([id, data, []]);
    }
    k += items.length;
  }
  return out;
}

function reanchor(anchor, previous, state) {
  const alive = new Set(itemIds(state));
  if (alive.has(anchor)) return anchor;
  const order = itemIds(previous);
  const p = order.indexOf(anchor);
  if (p >= 0) {
    for (const id of order.slice(p + 1)) if (alive.has(id)) return id;
    for (const id of order.slice(0, p).reverse()) if (alive.has(id)) return id;
  }
  const first = itemIds(state);
  return first.length ? first[0] : null;
}

/** One window over the published versions: its anchor, view and window at each version. */
class Tracker {
  constructor(w, state, version) {
    this.w = checkWindow(w);
    this.anchor = "anchor" in this.w ? this.w.anchor : undefined;
    this.at = new Map();
    this.lastChange = version;
    this.changes = new Set([version]); // the versions that bring this subscriber an event
    this.record(state, version);
  }
  record(state, version) {
    const [lo, hi, n] = windowRange(this.w, state, this.anchor ?? null);
    const window = { offset: lo, count: hi - lo, total: n };
    if ("anchor" in this.w) window.anchor = this.anchor;
    const view = windowView(state, lo, hi);
    this.at.set(version, { view, window });
    return view;
  }
  /** The next published version: does it change the view (or mark an item or section in it)? */
  advance(previous, state, version, marks) {
    const before = this.at.get(version - 1).view;
    if ("anchor" in this.w) this.anchor = reanchor(this.anchor, previous, state);
    const view = this.record(state, version);
    const inBoth = (ids, kind) => {
      const collect = (v) => new Set(kind === "items" ? itemIds(v) : v.map(([id]) => id));
      const [a, b] = [collect(before), collect(view)];
      return ids.some((id) => a.has(id) && b.has(id));
    };
    if (JSON.stringify(before) !== JSON.stringify(view) || inBoth(marks.items, "items") || inBoth(marks.sections, "sections")) {
      this.lastChange = version;
      this.changes.add(version);
    }
  }
  /** Moves the window at `version` (the `window` op): does the view change? */
  move(w, state, version) {
    const before = this.at.get(this.lastChange).view;
    this.w = checkWindow(w);
    this.anchor = "anchor" in this.w ? this.w.anchor : undefined;
    const view = this.record(state, version);
    const changed = JSON.stringify(before) !== JSON.stringify(view);
    if (changed) {
      this.lastChange = version;
      this.changes.add(version);
    }
    return changed;
  }
}

/** A windowed subscriber: its connection, mirror and tracker; every event checked against the model. */
class Subscriber {
  constructor(socketPath, name, w) {
    this.name = name;
    this.client = new LineClient(socketPath);
    this.mirror = new Mirror();
    this.w = w;
    this.events = 0;
  }
  /** Applies the events received so far; each must be the model's view at its version. */
  drain() {
    for (const line of this.client.takeEvents()) this.apply(line);
  }
  apply(line) {
    const event = parseEvent(line);
    const expected = this.tracker.at.get(event.version);
    assert.ok(expected, `${this.name}: an event for version ${event.version}, which the model has not seen`);
    assert.ok(this.tracker.changes.has(event.version), `${this.name}: an event for version ${event.version}, which leaves the view as it was: ${line}`);
    if (event.event === "changeset") assert.equal(event.from, this.mirror.version, `${this.name}: the chain`);
    this.mirror.apply(event); // checks the view's digest and that the window counts its items
    assert.deepEqual(plain(this.mirror.sections), expected.view, `${this.name}: the view at ${event.version}`);
    assert.deepEqual(this.mirror.window, expected.window, `${this.name}: the window at ${event.version}`);
    this.events += 1;
  }
  /** Waits until the mirror holds the version of the model's last change to its view. */
  async sync() {
    this.drain();
    while (this.mirror.version !== this.tracker.lastChange) {
      assert.ok(this.mirror.version < this.tracker.lastChange, `${this.name}: an event past the model's last change`);
      assert.ok(await this.client.arrival(), `${this.name}: no event for version ${this.tracker.lastChange}`);
      this.drain();
    }
  }
}

test("windowed mirrors hold the model's view at every event, and get one exactly when it changes", async () => {
  await withDaemon(async (socketPath) => {
    const writer = new LineClient(socketPath);
    const items = Array.from({ length: 40 }, (_, k) => `"i${k}"`);
    await writer.request(`apply r {"sections":[{"id":"s0","items":[${items.slice(0, 25)}]},{"id":"s1","items":[${items.slice(25)}]}]}`);
    const whole = new LineClient(socketPath);
    await whole.request("subscribe r");
    const mirror = new Mirror();
    mirror.apply(parseEvent(await whole.event()));
    let state = plain(mirror.sections);
    const subscribers = [
      new Subscriber(socketPath, "first", { first: 7 }),
      new Subscriber(socketPath, "last", { last: 5 }),
      new Subscriber(socketPath, "anchor", { anchor: "i13", before: 3, after: 4 }),
      new Subscriber(socketPath, "moved", { anchor: "i30", before: 2, after: 2 }),
    ];
    for (const subscriber of subscribers) {
      subscriber.tracker = new Tracker(subscriber.w, state, mirror.version);
      const answer = await subscriber.client.request({ op: "subscribe", collection: "r", window: subscriber.w });
      assert.ok(answer.ok, JSON.stringify(answer));
      await subscriber.sync();
      assert.equal(subscriber.events, 1);
    }
    const moved = subscribers[3];
    const random = generator(7);
    const item = () => `i${random(60)}`;
    const section = () => `s${random(4)}`;
    let versions = 0;
    let moves = 0;
    for (let step = 0; step < 1200; step += 1) {
      const data = JSON.stringify({ n: step, text: "é\u0301", list: [1.0, 2.5] }).replace("1,", "1.0,");
      const lines = [
        `append_sections r {"sections":[{"id":"${section()}","data":${data}}]}`,
        `append_items r {"section":"${section()}","items":[{"id":"${item()}","data":${data}},"${item()}"]}`,
        `append_items r {"section":"${section()}","items":[{"id":"${item()}","data":${data}}]}`,
        `insert_items r {"items":["${item()}"],"before":"${item()}"}`,
        `delete_items r {"items":["${item()}","${item()}"]}`,
        `move_item r {"item":"${item()}","after":"${item()}"}`,
        `move_item r {"item":"${item()}","before":"${item()}"}`,
        `update_items r {"items":[{"id":"${item()}","data":${data}}]}`,
        `reload_items r {"items":["${item()}"]}`,
        `reconfigure_items r {"items":["${item()}"]}`,
        `move_section r {"section":"${section()}","before":"${section()}"}`,
        `update_sections r {"sections":[{"id":"${section()}","data":{"title":${step}}}]}`,
        `reload_sections r {"sections":["${section()}"]}`,
        `delete_sections r {"sections":["${section()}"]}`,
      ];
      // Now and then the collection starts again: small (windows cover it, an anchor may have
      // no item to pass to) or empty (an anchor window without anchor).
      const again = `apply r {"sections":[{"id":"s1","items":[${Array.from({ length: 3 + random(40) }, () => `"${item()}"`).filter((id, k, all) => all.indexOf(id) === k)}]},{"id":"s2"}]}`;
      const line = random(150) === 0 ? "delete_all r" : random(50) === 0 ? again : lines[random(lines.length)];
      const answer = await writer.request(line);
      if (answer.ok) {
        // The whole mirror sees every version: the model advances each window through it.
        while (mirror.version < answer.version) {
          const event = parseEvent(await whole.event());
          assert.equal(event.version, mirror.version + 1, "one version per write");
          const previous = state;
          mirror.apply(event);
          state = plain(mirror.sections);
          const marks = {
            items: [...(event.items?.reloaded ?? []), ...(event.items?.updated ?? [])].map((x) => String(x.id)),
            sections: (event.sections?.reloaded ?? []).map((x) => String(x.id)),
          };
          for (const subscriber of subscribers) subscriber.tracker.advance(previous, state, mirror.version, marks);
          versions += 1;
        }
      }
      for (const subscriber of subscribers) subscriber.drain();
      if (step % 10 === 9) {
        for (const subscriber of subscribers) await subscriber.sync();
        // Move one window: before the `window` op's answer comes the changeset to the new view
        // (from the subscriber's last event), or nothing when the view is the same.
        const ids = itemIds(state);
        const choices = [{ first: 1 + random(6) }, { last: 1 + random(6) }];
        if (ids.length) choices.push({ anchor: ids[random(ids.length)], before: random(4), after: random(4) });
        const w = choices[random(choices.length)];
        const lastEvent = moved.mirror.version;
        const changed = moved.tracker.move(w, state, mirror.version);
        moved.client.socket.write(JSON.stringify({ op: "window", collection: "r", window: w }) + "\n");
        const response = JSON.parse(await moved.client.next((text) => text.startsWith('{"ok"')));
        assert.ok(response.ok, JSON.stringify(response));
        assert.equal(response.version, mirror.version);
        const events = moved.client.takeEvents();
        assert.equal(events.length, changed ? 1 : 0, `window ${JSON.stringify(w)}: ${events}`);
        if (changed) {
          const event = parseEvent(events[0]);
          assert.equal(event.from, lastEvent);
          assert.ok(!event.items?.reloaded && !event.sections?.reloaded, "a window op's changeset has no marks");
          moved.apply(events[0]);
        }
        moves += 1;
      }
    }
    for (const subscriber of subscribers) await subscriber.sync();
    // Each view agrees with `get` with its window (the anchor where the model holds it).
    for (const subscriber of subscribers) {
      const w = "anchor" in subscriber.tracker.w ? { ...subscriber.tracker.w, anchor: subscriber.tracker.anchor } : subscriber.tracker.w;
      if (w.anchor === null) continue;
      const got = parseEvent((await writer.requestText({ op: "get", collection: "r", window: w })).replace('{"ok":true,"op":"get",', '{"event":"snapshot",'));
      const reference = new Mirror();
      reference.apply(got);
      assert.deepEqual(plain(reference.sections), plain(subscriber.mirror.sections), subscriber.name);
      assert.equal(got.digest, subscriber.mirror.digest, subscriber.name);
    }
    assert.ok(versions > 200, `only ${versions} versions`);
    const counts = subscribers.map((s) => s.events);
    // Each got events, and none at many versions (those that left its view as it was).
    assert.ok(counts.every((n) => n > 20 && versions - n > 10), `events per subscriber ${counts} of ${versions} versions`);
    assert.equal(moves, 120);
    for (const client of [writer, whole, ...subscribers.map((s) => s.client)]) client.close();
  });
});

test("checkWindow and windowQuery", () => {
  assert.deepEqual(checkWindow({ first: 3 }), { first: 3 });
  assert.deepEqual(checkWindow({ anchor: "a" }), { anchor: "a", before: 0, after: 0 });
  assert.equal(windowQuery({ anchor: "a b", before: 2, after: 3 }), "anchor=a+b&before=2&after=3");
  assert.equal(windowQuery({ last: 50 }), "last=50");
  for (const bad of [{}, { first: 0 }, { first: 1, last: 1 }, { anchor: "a", before: -1 }, { last: 1.5 }, null]) {
    assert.throws(() => checkWindow(bad), TypeError, JSON.stringify(bad));
  }
});

test("a windowed follow over a WebSocket: moves, a refused move, a lost connection, a divergence, a lost anchor", async () => {
  await withDaemon(
    async (socketPath, port) => {
      const writer = new LineClient(socketPath);
      const ids = Array.from({ length: 200 }, (_, k) => `"a${k}"`);
      await writer.request(`apply f {"sections":[{"id":"s0","items":[${ids.slice(0, 120)}]},{"id":"s1","data":{"t":1},"items":[${ids.slice(120)}]}]}`);
      const get = async (window) => {
        const text = await writer.requestText({ op: "get", collection: "f", ...(window ? { window } : {}) });
        return parseEvent(text.replace('{"ok":true,"op":"get",', '{"event":"snapshot",'));
      };
      /** The followed mirror holds `get` with the window the follow says it holds. */
      const holdsGet = async () => {
        const got = await get(followed.window);
        return got.digest === followed.mirror.digest && JSON.stringify(got.window ?? null) === JSON.stringify(followed.mirror.window);
      };
      const updates = [];
      TestWebSocket.instances = [];
      const followed = follow(`ws://127.0.0.1:${port}/v1/ws`, {
        transport: "websocket",
        collection: "f",
        window: { anchor: "a100", before: 5, after: 5 },
        WebSocket: TestWebSocket,
        onChange: (update) => updates.push(update.kind),
      });
      const sent = () => TestWebSocket.instances.flatMap((socket) => socket.sent.map((text) => JSON.parse(text)));
      await until(() => followed.mirror.version !== null, "the first snapshot");
      assert.deepEqual(followed.mirror.window, { offset: 95, count: 11, total: 200, anchor: "a100" });
      assert.ok(await holdsGet());
      assert.equal(plain(followed.mirror.sections).flatMap(([, , items]) => items).length, 11);

      // Moving over the WebSocket is the `window` op; its changeset comes before its answer.
      const answer = await followed.moveWindow({ anchor: "a150", before: 2, after: 3 });
      assert.equal(answer.op, "window");
      assert.deepEqual(followed.mirror.window, { offset: 148, count: 6, total: 200, anchor: "a150" });
      assert.deepEqual(sent().at(-1), { op: "window", collection: "f", window: { anchor: "a150", before: 2, after: 3 }, id: sent().at(-1).id });
      assert.ok(await holdsGet());
      // A refused move changes nothing.
      const digestBefore = followed.mirror.digest;
      await assert.rejects(followed.moveWindow({ anchor: "nope", before: 1 }), (error) => error.code === "unknown_item");
      assert.equal(followed.mirror.digest, digestBefore);
      assert.deepEqual(followed.window, { anchor: "a150", before: 2, after: 3 });

      // The anchor follows its item: deleted, it passes to the next.
      await writer.request('delete_items f {"items":["a150"]}');
      await until(() => followed.mirror.window.anchor === "a151", "the anchor moved to a151");
      assert.deepEqual(followed.window, { anchor: "a151", before: 2, after: 3 });
      assert.ok(await holdsGet());

      // A lost connection: subscribing again with the window at its anchor now, no since.
      const version = (await writer.request('update_items f {"items":[{"id":"a151","data":{"x":1}}]}')).version;
      await until(() => followed.mirror.version === version, "the update");
      TestWebSocket.refuse = true;
      TestWebSocket.instances.at(-1).socket.destroy();
      await writer.request('update_items f {"items":[{"id":"a152","data":{"x":2}}]}');
      await writer.request('delete_items f {"items":["a147"]}');
      TestWebSocket.refuse = false;
      const snapshots = updates.filter((kind) => kind === "snapshot").length;
      await until(() => updates.filter((kind) => kind === "snapshot").length === snapshots + 1, "a snapshot after reconnecting");
      const subscribe = sent().filter((request) => request.op === "subscribe").at(-1);
      assert.deepEqual(subscribe.window, { anchor: "a151", before: 2, after: 3 });
      assert.ok(!("since" in subscribe) && !("epoch" in subscribe));
      assert.ok(await holdsGet());
      assert.ok(plain(followed.mirror.sections)[0][2].some(([id, data]) => id === "a152" && data === '{"x":2}'));

      // A divergence (a damaged digest): subscribing again with the window, no since.
      TestWebSocket.damage = (text) => text.replace(/"digest":"(.)/, (_, c) => `"digest":"${c === "1" ? "2" : "1"}`);
      await writer.request('update_items f {"items":[{"id":"a153","data":{"x":3}}]}');
      await until(() => followed.divergences === 1, "the divergence");
      await until(() => followed.mirror.version !== null, "the snapshot after the divergence");
      assert.deepEqual(sent().filter((request) => request.op === "subscribe").at(-1).window, { anchor: "a151", before: 2, after: 3 });
      assert.ok(await holdsGet());

      // The anchor deleted while the connection is lost: the follow starts at the top.
      TestWebSocket.refuse = true;
      TestWebSocket.instances.at(-1).socket.destroy();
      await writer.request('delete_items f {"items":["a151"]}');
      TestWebSocket.refuse = false;
      await until(() => followed.window && "first" in followed.window && followed.mirror.window?.offset === 0, "the window at the top");
      assert.deepEqual(followed.window, { first: 6 });
      assert.ok(await holdsGet());

      // From a window to the whole collection and back (a new subscription on the same socket).
      const sockets = TestWebSocket.instances.length;
      await followed.moveWindow(null);
      assert.equal(followed.mirror.window, null);
      assert.equal(followed.window, null);
      assert.ok(await holdsGet());
      await followed.moveWindow({ last: 3 });
      assert.deepEqual(followed.mirror.window, { offset: 194, count: 3, total: 197 });
      assert.ok(await holdsGet());
      assert.equal(TestWebSocket.instances.length, sockets);
      followed.close();
      writer.close();
    },
    { http: true },
  );
});

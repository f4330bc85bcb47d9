// Diffcast's JavaScript client: one ES module, no dependencies, no build step. The daemon
// serves it at /v1/diffcast.js.
//
//   import { follow, bindList } from "/v1/diffcast.js";
//   const stream = follow("/v1/collections/feed/events", { onChange: (changeset, mirror) => … });
//   bindList(document.querySelector("#feed"), stream, { render: (item, element) => … });
//
// `Mirror` applies changesets by SPEC.md's normative steps and checks the digest of every
// version; `follow` keeps a mirror in step over Server-Sent Events (or a WebSocket), subscribes
// again after a divergence and resumes after a lost connection; `bindList` keeps a DOM list in
// step with a mirror, animating inserts, deletes and moves and re-rendering an updated item in
// its own element.
//
// Windows (contract 3): `follow(url, {window: {first: N} | {last: N} | {anchor: ID, before, after}})`
// holds only that part of the collection (the mirror holds the view; its digest is the view's,
// `mirror.window` is the last event's `{offset, count, total[, anchor]}`), and `moveWindow(W)`
// moves it. `bindList(container, followed, {windowed: true})` shows a big collection as one
// scroll area as tall as all of it, holding only the rows around what is visible, and moves the
// window as the user scrolls.

/** A changeset that does not fit the mirror, or a digest that does not match. */
export class Divergence extends Error {
  constructor(message) {
    super(message);
    this.name = "Divergence";
  }
}

/** JSON data kept as the daemon wrote it: its text is what the digest covers. */
export class Data {
  constructor(text) {
    this.text = text;
  }
  get value() {
    if (!("_value" in this)) this._value = JSON.parse(this.text);
    return this._value;
  }
}

// ---------------------------------------------------------------------------------------------
// Reading event lines: JSON, except that every member named "data" keeps its text.

/** Parses one event line; every `data` member becomes a `Data` holding its exact text. */
export function parseEvent(text) {
  let position = 0;
  const fail = (what) => {
    throw new Divergence(`not an event line: ${what} at ${position}`);
  };
  const space = () => {
    while (position < text.length && " \t\r\n".includes(text[position])) position += 1;
  };
  const skipValue = () => {
    // The end of one JSON value, for the text of a `data` member: strings are stepped over,
    // brackets counted, and the value ends at a comma or a closing bracket at its own depth.
    space();
    const start = position;
    let depth = 0;
    while (position < text.length) {
      const c = text[position];
      if (c === '"') {
        position += 1;
        while (text[position] !== '"') {
          if (position >= text.length) fail("an unfinished string");
          position += text[position] === "\\" ? 2 : 1;
        }
      } else if (c === "{" || c === "[") {
        depth += 1;
      } else if (c === "}" || c === "]") {
        if (depth === 0) break;
        depth -= 1;
      } else if (c === "," && depth === 0) {
        break;
      }
      position += 1;
    }
    if (depth !== 0) fail("an unfinished value");
    return text.slice(start, position).trimEnd();
  };
  const value = () => {
    space();
    const c = text[position];
    if (c === "{") {
      position += 1;
      const object = {};
      space();
      if (text[position] === "}") {
        position += 1;
        return object;
      }
      for (;;) {
        space();
        if (text[position] !== '"') fail("a key");
        const key = string();
        space();
        if (text[position] !== ":") fail("a colon");
        position += 1;
        if (key === "data") {
          const raw = skipValue();
          object[key] = raw === "null" ? null : new Data(canonicalText(raw));
        } else {
          object[key] = value();
        }
        space();
        if (text[position] === ",") {
          position += 1;
          continue;
        }
        if (text[position] === "}") {
          position += 1;
          return object;
        }
        fail("a comma or a brace");
      }
    }
    if (c === "[") {
      position += 1;
      const array = [];
      space();
      if (text[position] === "]") {
        position += 1;
        return array;
      }
      for (;;) {
        array.push(value());
        space();
        if (text[position] === ",") {
          position += 1;
          continue;
        }
        if (text[position] === "]") {
          position += 1;
          return array;
        }
        fail("a comma or a bracket");
      }
    }
    if (c === '"') return string();
    const raw = skipValue();
    if (raw === "") fail("a value");
    return JSON.parse(raw);
  };
  const string = () => {
    const start = position;
    position += 1;
    while (text[position] !== '"') {
      if (text[position] === undefined) fail("an unfinished string");
      position += text[position] === "\\" ? 2 : 1;
    }
    position += 1;
    return JSON.parse(text.slice(start, position));
  };
  let event;
  try {
    event = value();
    space();
  } catch (error) {
    if (error instanceof Divergence) throw error;
    throw new Divergence(`not an event line: ${error.message}`);
  }
  if (position !== text.length) fail("text after the value");
  return event;
}

/**
 * A JSON value's canonical compact text (SPEC.md "Digest"): no white space, numbers and key
 * order as written, each string as JSON.stringify writes it (`"\u00e9"` becomes `"é"`).
 */
function canonicalText(raw) {
  let out = "";
  let position = 0;
  while (position < raw.length) {
    const c = raw[position];
    if (c === '"') {
      let end = position + 1;
      while (raw[end] !== '"') {
        if (end >= raw.length) throw new Divergence("not an event line: an unfinished string in data");
        end += raw[end] === "\\" ? 2 : 1;
      }
      out += JSON.stringify(JSON.parse(raw.slice(position, end + 1)));
      position = end + 1;
    } else {
      if (!" \t\r\n".includes(c)) out += c;
      position += 1;
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The digest (SPEC.md "Digest"): a 61-bit polynomial hash of FNV-1a 64 token hashes.

const P = (1n << 61n) - 1n;
const B = 1099511628211n;
const encoder = new TextEncoder();

/** FNV-1a 64 of a string's UTF-8 bytes, as a BigInt (two 32-bit halves in doubles: fast). */
export function fnv1a64(text) {
  const bytes = encoder.encode(text);
  let hi = 0xcbf29ce4;
  let lo = 0x84222325;
  for (let i = 0; i < bytes.length; i += 1) {
    lo = (lo ^ bytes[i]) >>> 0;
    // (hi:lo) * (2^40 + 0x1b3) mod 2^64
    const low = lo * 0x1b3;
    const high = hi * 0x1b3 + Math.floor(low / 4294967296) + ((lo * 256) % 4294967296);
    lo = low % 4294967296;
    hi = high % 4294967296;
  }
  return (BigInt(hi) << 32n) | BigInt(lo);
}

function tokenHash(kind, id, data) {
  return fnv1a64(`${kind}${id}\n${data ? data.text : ""}\n`) % P;
}

/** The digest of sections (`[{id, data, items: [{id, data}]}]`) as 16 hex digits. */
export function digest(sections) {
  let value = 0n;
  for (const section of sections) {
    value = (value * B + tokenHash("S", section.id, section.data)) % P;
    for (const item of section.items) {
      value = (value * B + tokenHash("I", item.id, item.data)) % P;
    }
  }
  return value.toString(16).padStart(16, "0");
}

// ---------------------------------------------------------------------------------------------
// The mirror.

const identifier = (value, where) => {
  if (typeof value === "string") return value;
  if (typeof value === "number" && Number.isSafeInteger(value)) return String(value);
  throw new Divergence(`${where}: not an identifier`);
};
const index = (value, where) => {
  if (!Number.isSafeInteger(value) || value < 0) throw new Divergence(`${where}: not an index`);
  return value;
};
const path = (value, where) => {
  if (!Array.isArray(value) || value.length !== 2) throw new Divergence(`${where}: not a path`);
  return [index(value[0], where), index(value[1], where)];
};
const list = (object, key) => {
  const value = object && object[key];
  if (value === undefined) return [];
  if (!Array.isArray(value)) throw new Divergence(`${key}: not a list`);
  return value;
};
const dataOf = (value) => (value instanceof Data ? value : null);

/** A verified copy of one collection, as its events build it. */
export class Mirror {
  constructor() {
    this.epoch = null;
    this.version = null;
    this.sections = [];
    /** The last event's `window` (`{offset, count, total[, anchor]}`), null for a whole collection. */
    this.window = null;
    /** The last verified digest (of the view, for a window). */
    this.digest = null;
  }

  /**
   * Applies one event (parsed with `parseEvent`); returns what changed as
   * `{kind: "snapshot" | "changeset" | "dropped", changeset?}`. Throws `Divergence`, leaving the
   * mirror as it was, when the event does not fit or its digest differs.
   */
  apply(event) {
    if (event === null || typeof event !== "object") throw new Divergence("not an event");
    switch (event.event) {
      case "snapshot": {
        const sections = list(event, "sections").map((section, s) => ({
          id: identifier(section.id, `sections[${s}]`),
          data: dataOf(section.data),
          items: list(section, "items").map((item, i) =>
            typeof item === "object" && item !== null
              ? { id: identifier(item.id, `sections[${s}].items[${i}]`), data: dataOf(item.data) }
              : { id: identifier(item, `sections[${s}].items[${i}]`), data: null },
          ),
        }));
        this.check(sections, event.digest);
        this.commit(event, sections);
        return { kind: "snapshot" };
      }
      case "changeset": {
        if (this.version === null) throw new Divergence("a changeset before any snapshot");
        // A compact changeset leaves out the epoch and `from` its subscription established (the
        // epoch of the last snapshot, the version the mirror holds); the changeset reported has
        // them filled in.
        const changeset = "epoch" in event && "from" in event ? event : { epoch: this.epoch, from: this.version, ...event };
        if (changeset.epoch !== this.epoch) throw new Divergence(`epoch ${changeset.epoch} is not ${this.epoch}`);
        if (changeset.from !== this.version) {
          throw new Divergence(`chain broken: changeset from ${changeset.from} but the mirror holds ${this.version}`);
        }
        const sections = applyChangeset(this.sections, changeset);
        this.check(sections, changeset.digest);
        this.commit(changeset, sections);
        return { kind: "changeset", changeset };
      }
      case "dropped":
        this.epoch = null;
        this.version = null;
        this.sections = [];
        this.window = null;
        this.digest = null;
        return { kind: "dropped" };
      default:
        throw new Divergence(`unknown event '${event.event}'`);
    }
  }

  check(sections, expected) {
    const actual = digest(sections);
    if (actual !== expected) throw new Divergence(`digest ${actual} is not the daemon's ${expected}`);
  }

  commit(event, sections) {
    if (typeof event.version !== "number") throw new Divergence("no version");
    const window = event.window ?? null;
    if (window !== null) {
      // A view: its items are the window's `count` items from `offset` of `total`.
      const { offset, count, total } = window;
      const held = sections.reduce((sum, section) => sum + section.items.length, 0);
      if (![offset, count, total].every((n) => Number.isSafeInteger(n) && n >= 0) || offset + count > total) {
        throw new Divergence(`window ${JSON.stringify(window)} is not a window`);
      }
      if (held !== count) throw new Divergence(`the view holds ${held} items, its window counts ${count}`);
    }
    this.epoch = event.epoch;
    this.version = event.version;
    this.sections = sections;
    this.window = window;
    this.digest = event.digest;
  }

  /** The items in order across sections. */
  get items() {
    return this.sections.flatMap((section) => section.items);
  }
}

/** SPEC.md's normative steps, on copies: the sections the changeset leads to. */
export function applyChangeset(current, changeset) {
  const sectionChanges = changeset.sections || {};
  const itemChanges = changeset.items || {};
  const sections = current.map((section) => ({ ...section, items: section.items.slice() }));
  // 1. Items out at old coordinates, moved ones kept by identifier.
  const removals = new Map();
  const movedItems = new Map();
  const takeOut = (at, id, where) => {
    const [s, i] = path(at, where);
    const item = sections[s] && sections[s].items[i];
    if (!item || item.id !== identifier(id, where)) throw new Divergence(`${where} ${at} does not hold '${id}'`);
    const positions = removals.get(s) || new Set();
    if (positions.has(i)) throw new Divergence(`item [${s},${i}] is taken out twice`);
    removals.set(s, positions.add(i));
    return item;
  };
  list(itemChanges, "deleted").forEach((entry) => takeOut(entry.at, entry.id, "items.deleted"));
  list(itemChanges, "moved").forEach((entry) => {
    const item = takeOut(entry.from, entry.id, "items.moved");
    if (movedItems.has(item.id)) throw new Divergence(`item '${item.id}' is moved twice`);
    movedItems.set(item.id, item);
  });
  for (const [s, positions] of removals) {
    sections[s].items = sections[s].items.filter((_, i) => !positions.has(i));
  }
  // 2. Sections out at old indices, moved ones kept with their remaining items.
  const removedSections = new Set();
  const movedSections = new Map();
  const takeSection = (at, id, where) => {
    const s = index(at, where);
    if (!sections[s] || sections[s].id !== identifier(id, where) || removedSections.has(s)) {
      throw new Divergence(`${where} ${at} does not hold '${id}'`);
    }
    removedSections.add(s);
    return sections[s];
  };
  list(sectionChanges, "deleted").forEach((entry) => takeSection(entry.index, entry.id, "sections.deleted"));
  list(sectionChanges, "moved").forEach((entry) =>
    movedSections.set(entry.id, takeSection(entry.from, entry.id, "sections.moved")),
  );
  let now = sections.filter((_, s) => !removedSections.has(s));
  // 3. Sections in at new indices, ascending.
  const sectionArrivals = [
    ...list(sectionChanges, "inserted").map((entry) => [
      index(entry.index, "sections.inserted"),
      { id: identifier(entry.id, "sections.inserted"), data: dataOf(entry.data), items: [] },
    ]),
    ...list(sectionChanges, "moved").map((entry) => [index(entry.to, "sections.moved"), movedSections.get(entry.id)]),
  ].sort((a, b) => a[0] - b[0]);
  for (const [at, section] of sectionArrivals) {
    if (at > now.length) throw new Divergence(`section insert at ${at} out of range`);
    now.splice(at, 0, section);
  }
  // 4. Items in at new coordinates, ascending by section, then index.
  const itemArrivals = [
    ...list(itemChanges, "inserted").map((entry) => [
      path(entry.at, "items.inserted"),
      { id: identifier(entry.id, "items.inserted"), data: dataOf(entry.data) },
    ]),
    ...list(itemChanges, "moved").map((entry) => [path(entry.to, "items.moved"), movedItems.get(entry.id)]),
  ].sort((a, b) => a[0][0] - b[0][0] || a[0][1] - b[0][1]);
  for (const [[s, i], item] of itemArrivals) {
    if (!now[s] || i > now[s].items.length) throw new Divergence(`item insert at [${s},${i}] out of range`);
    now[s].items.splice(i, 0, item);
  }
  // 5. Data.
  list(sectionChanges, "updated").forEach((entry) => {
    const s = index(entry.index, "sections.updated");
    if (!now[s] || now[s].id !== identifier(entry.id, "sections.updated")) {
      throw new Divergence(`sections.updated ${s} does not hold '${entry.id}'`);
    }
    now[s] = { ...now[s], data: dataOf(entry.data) };
  });
  list(itemChanges, "updated").forEach((entry) => {
    const [s, i] = path(entry.at, "items.updated");
    const item = now[s] && now[s].items[i];
    if (!item || item.id !== identifier(entry.id, "items.updated")) {
      throw new Divergence(`items.updated [${s},${i}] does not hold '${entry.id}'`);
    }
    now[s].items[i] = { id: item.id, data: dataOf(entry.data) };
  });
  for (const entry of list(itemChanges, "reloaded")) {
    const [s, i] = path(entry.at, "items.reloaded");
    if (!now[s] || !now[s].items[i] || now[s].items[i].id !== identifier(entry.id, "items.reloaded")) {
      throw new Divergence(`items.reloaded [${s},${i}] does not hold '${entry.id}'`);
    }
  }
  // Identifiers stay unique.
  const seenSections = new Set();
  const seenItems = new Set();
  for (const section of now) {
    if (seenSections.has(section.id)) throw new Divergence(`section '${section.id}' twice`);
    seenSections.add(section.id);
    for (const item of section.items) {
      if (seenItems.has(item.id)) throw new Divergence(`item '${item.id}' twice`);
      seenItems.add(item.id);
    }
  }
  return now;
}

// ---------------------------------------------------------------------------------------------
// Following a collection.

/** A window as `subscribe`, `window` and `get` take it; throws a TypeError for anything else. */
export function checkWindow(window) {
  const count = (key, least) => {
    const value = window[key] ?? least;
    if (!Number.isSafeInteger(value) || value < least) throw new TypeError(`window ${key} must be an integer >= ${least}`);
    return value;
  };
  const forms = ["first", "last", "anchor"].filter((key) => window && key in window);
  if (forms.length !== 1) throw new TypeError("a window is {first: N}, {last: N} or {anchor: ID, before?, after?}");
  if (forms[0] !== "anchor") return { [forms[0]]: count(forms[0], 1) };
  return { anchor: window.anchor, before: count("before", 0), after: count("after", 0) };
}

/** The query of a windowed events endpoint: `first=N`, `last=N` or `anchor=ID&before=B&after=A`. */
export function windowQuery(window) {
  return new URLSearchParams(Object.entries(checkWindow(window)).map(([key, value]) => [key, String(value)])).toString();
}

/** The `exp` of a JWT (seconds since 1970), or null when it has none or is not a JWT. */
export function tokenExpiry(jwt) {
  try {
    const part = jwt.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    const claims = JSON.parse(atob(part + "=".repeat((4 - (part.length % 4)) % 4)));
    return typeof claims.exp === "number" ? claims.exp : null;
  } catch {
    return null;
  }
}

/** A refused request's answer as an Error with its `code`. */
function refusal(answer, what) {
  const error = new Error(`${what}: ${answer.error ? `${answer.error.code}: ${answer.error.message}` : "refused"}`);
  error.code = answer.error && answer.error.code;
  error.answer = answer;
  return error;
}

/**
 * Follows a collection and keeps a verified mirror of it. `url` is the events endpoint
 * (`/v1/collections/NAME/events`, over Server-Sent Events) or, with `{transport: "websocket"}`,
 * the WebSocket endpoint (`/v1/ws`) and `{collection}`. Options: `onChange(update, mirror)`,
 * `onDivergence(error)`, `onStatus(text)`, `onError(error)` (a refused subscription), `token`
 * (a JWT, or a function that returns one or a promise of one: it is called again before each
 * connection and before the token expires, and when the daemon revokes the subscription, which
 * then resumes with one changeset; over a WebSocket the token goes in an `auth` line, over
 * Server-Sent Events in `?token=`, where EventSource can put it), `window` (hold only that window
 * of the collection: `{first: N}`, `{last: N}` or
 * `{anchor: ID, before: B, after: A}`), `WebSocket` (a constructor, where there is no global
 * one). Returns `{mirror, window, moveWindow(W), request(body), close()}` and is an
 * EventTarget-like object for `bindList`.
 *
 * Both transports ask for compact changesets (`?compact=1`: without the epoch and `from` the
 * mirror holds, and over Server-Sent Events without the collection); the changesets reported
 * have them filled in.
 *
 * A whole collection resumes from the version it holds after a lost connection. A windowed one
 * subscribes again with its window (no `since`): an anchor window with the item the daemon
 * last said it follows, or, when that item is gone, `{first: before + 1 + after}`. `moveWindow`
 * sends the `window` op over a WebSocket (the view's changeset comes before its answer) and
 * opens the stream again with the new window over Server-Sent Events (the view's snapshot);
 * its promise settles once the mirror holds the new view, or is refused (an anchor that is not
 * in the collection: `error.code === "unknown_item"`), and the old window goes on. A collection
 * that does not exist yet (`unknown_collection`: its holder may only read it) is asked for again
 * every second until it does.
 */
export function follow(url, options = {}) {
  const listeners = new Set();
  const tokenSource = options.token;
  // The token presented now; a function's result is fetched again by `freshToken`.
  let token = typeof tokenSource === "function" ? null : tokenSource ?? null;
  let refreshTimer = null;
  let openings = 0;
  const overWebSocket = options.transport === "websocket";
  const collection =
    options.collection ??
    (() => {
      const match = /\/collections\/([^/?#]+)\/events/.exec(url);
      return match ? decodeURIComponent(match[1]) : undefined;
    })();
  // The window asked for, and the anchor the daemon holds it at now (it follows its item).
  let requested = options.window ? checkWindow(options.window) : null;
  let anchor = requested && "anchor" in requested ? requested.anchor : undefined;
  // Promises of moveWindow that settle with the next snapshot (a new subscription's view).
  let snapshotWaiters = [];
  const pending = new Map();
  let nextId = 1;
  let source = null;
  let retry = null;

  const state = {
    mirror: new Mirror(),
    divergences: 0,
    versions: 0,
    closed: false,
    collection,
    /** The window the subscription holds now (an anchor window at its current anchor), or null. */
    get window() {
      if (!requested) return null;
      return "anchor" in requested ? { ...requested, anchor } : { ...requested };
    },
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    close() {
      state.closed = true;
      clearTimeout(retry);
      clearTimeout(refreshTimer);
      if (source) source.close();
      failPending(new Error("closed"));
      for (const waiter of snapshotWaiters.splice(0)) waiter.reject(new Error("closed"));
    },
    /** Moves the window (null: the whole collection); resolves once the mirror holds the new view. */
    moveWindow(window) {
      const next = window ? checkWindow(window) : null;
      if (state.closed) return Promise.reject(new Error("closed"));
      if (overWebSocket && source && source.readyState === 1 && requested && next) {
        return state.request({ op: "window", collection, window: next }).then((answer) => {
          if (!answer.ok) throw refusal(answer, "window");
          requested = next;
          if ("anchor" in next) anchor = next.anchor;
          return answer;
        });
      }
      // A new subscription: over the open WebSocket (it replaces the old one), else a new stream.
      const previous = { requested, anchor };
      requested = next;
      anchor = next && "anchor" in next ? next.anchor : undefined;
      const settled = new Promise((resolve, reject) => snapshotWaiters.push({ resolve, reject, previous }));
      if (overWebSocket && source && source.readyState === 1) sendSubscribe(source, false);
      else if (!overWebSocket) open(false);
      return settled;
    },
    /**
     * One request (`{op, ...}`) and its answer: over the WebSocket, or `POST /v1/requests`
     * beside a Server-Sent Events stream. Answers are parsed with `JSON.parse`.
     */
    request(body) {
      if (overWebSocket) {
        if (!source || source.readyState !== 1) return Promise.reject(new Error("not connected"));
        const id = `dc${nextId++}`;
        return new Promise((resolve, reject) => {
          pending.set(id, { resolve, reject });
          source.send(JSON.stringify({ ...body, id }));
        });
      }
      const address = options.requestsURL || url.replace(/\/collections\/[^/?#]+\/events.*$/, "/requests");
      const headers = { "Content-Type": "application/json" };
      if (token) headers.Authorization = `Bearer ${token}`;
      return fetch(address, { method: "POST", headers, body: JSON.stringify(body) }).then((response) =>
        response.text().then((text) => JSON.parse(text)),
      );
    },
  };
  const failPending = (error) => {
    for (const { reject } of pending.values()) reject(error);
    pending.clear();
  };
  const emit = (update) => {
    state.versions += 1;
    for (const listener of listeners) listener(update, state.mirror);
    if (options.onChange) options.onChange(update, state.mirror);
  };
  const status = (text) => options.onStatus && options.onStatus(text);
  const handle = (text) => {
    try {
      const update = state.mirror.apply(parseEvent(text));
      if (state.mirror.window && "anchor" in state.mirror.window) anchor = state.mirror.window.anchor;
      if (update.kind === "snapshot") {
        for (const waiter of snapshotWaiters.splice(0)) waiter.resolve(update);
      }
      emit(update);
    } catch (error) {
      if (!(error instanceof Divergence)) throw error;
      state.divergences += 1;
      if (options.onDivergence) options.onDivergence(error);
      // Subscribe again without a position (a windowed follow with its window): a snapshot
      // puts the mirror right.
      state.mirror = new Mirror();
      open(false);
    }
  };
  /** The window a new subscription asks for: the anchor where the daemon last held it. */
  const subscriptionWindow = () => {
    if (!requested) return null;
    if (!("anchor" in requested)) return requested;
    if (anchor === null || anchor === undefined) return lostAnchor();
    return { ...requested, anchor };
  };
  const lostAnchor = () => {
    requested = { first: Math.max(1, requested.before + 1 + requested.after) };
    anchor = undefined;
    return requested;
  };
  /** A refused subscription: a move goes back to the window before it; a lost anchor starts at the top. */
  const refused = (answer, resubscribe) => {
    const error = refusal(answer, "subscribe");
    const waiters = snapshotWaiters.splice(0);
    if (waiters.length) {
      ({ requested, anchor } = waiters[0].previous);
      for (const waiter of waiters) waiter.reject(error);
      resubscribe();
    } else if (requested && "anchor" in requested && error.code === "unknown_item") {
      lostAnchor();
      resubscribe();
    } else if (error.code === "unknown_collection") {
      // A reader does not bring a collection into being: wait for a writer to.
      status("waiting for the collection");
      retry = setTimeout(resubscribe, 1000);
    } else {
      status(error.message);
      if (options.onError) options.onError(error);
    }
  };
  /** Asks the token function for a token, and plans the next ask before this one expires. */
  const freshToken = async () => {
    if (typeof tokenSource !== "function") return token;
    token = await tokenSource();
    clearTimeout(refreshTimer);
    const expiry = tokenExpiry(token);
    if (expiry !== null && !state.closed) {
      const left = expiry * 1000 - Date.now();
      refreshTimer = setTimeout(refresh, Math.max(1000, left - Math.min(30000, left / 5)));
    }
    return token;
  };
  /** A new token before the old one expires: a WebSocket presents it (`auth`), the subscription
   * goes on; an event stream opens again with it and resumes. */
  const refresh = async () => {
    if (state.closed) return;
    if (overWebSocket && source && source.readyState === 1) {
      const socket = source;
      try {
        await freshToken();
      } catch (error) {
        return status(`token: ${error.message}`);
      }
      if (source === socket && socket.readyState === 1) sendAuth(socket);
    } else if (!overWebSocket) {
      open(true);
    }
  };
  /** The subscription ended because its rights did: with a token function, a fresh token and a
   * resume (one changeset); else the error is reported. */
  const revoked = (text) => {
    let event;
    try {
      event = JSON.parse(text);
    } catch {
      event = {};
    }
    const error = refusal({ ok: false, error: event.error }, "revoked");
    if (typeof tokenSource === "function") {
      status("revoked: refreshing the token");
      return open(true);
    }
    status(error.message);
    if (options.onError) options.onError(error);
  };
  const withToken = (address) => {
    if (!token) return address;
    return address + (address.includes("?") ? "&" : "?") + "token=" + encodeURIComponent(token);
  };
  const sendAuth = (socket) => {
    const id = `dc${nextId++}`;
    pending.set(id, {
      resolve: (answer) => {
        if (answer.ok) return;
        const error = refusal(answer, "auth");
        status(error.message);
        if (options.onError) options.onError(error);
      },
      reject: () => {},
    });
    socket.send(JSON.stringify({ op: "auth", token, id }));
  };
  const sendSubscribe = (socket, resume) => {
    const id = `dc${nextId++}`;
    const request = { op: "subscribe", collection, id };
    const window = subscriptionWindow();
    if (window) request.window = window;
    else if (resume && state.mirror.version !== null) {
      request.since = state.mirror.version;
      request.epoch = state.mirror.epoch;
    }
    pending.set(id, {
      resolve: (answer) => answer.ok || refused(answer, () => socket.readyState === 1 && sendSubscribe(socket, false)),
      reject: () => {},
    });
    socket.send(JSON.stringify(request));
  };
  /** (Re)connects, with a fresh token when the token is a function. */
  const open = (resume) => {
    if (state.closed) return;
    clearTimeout(retry);
    if (source) source.close();
    source = null;
    failPending(new Error("the connection was closed"));
    const opening = ++openings;
    Promise.resolve()
      .then(freshToken)
      .then(
        () => opening === openings && !state.closed && connect(resume),
        (error) => {
          status(`token: ${error.message}`);
          retry = setTimeout(() => open(resume), 2000);
        },
      );
  };
  const connect = (resume) => {
    if (overWebSocket) {
      const Socket = options.WebSocket || globalThis.WebSocket;
      // Changesets in their compact form: without the epoch and `from` the mirror holds.
      const socket = new Socket(url + (url.includes("?") ? "&" : "?") + "compact=1");
      source = socket;
      socket.onopen = () => {
        // The token goes in a line, never in the URL (which proxies log).
        if (token) sendAuth(socket);
        sendSubscribe(socket, resume);
        status("connected");
      };
      socket.onmessage = (message) => {
        if (source !== socket) return;
        const text = message.data;
        if (text.startsWith('{"event":"revoked"')) return revoked(text);
        if (text.startsWith('{"event"')) return handle(text);
        let answer;
        try {
          answer = JSON.parse(text);
        } catch {
          return;
        }
        const waiter = pending.get(answer.id);
        if (waiter) {
          pending.delete(answer.id);
          waiter.resolve(answer);
        }
      };
      socket.onclose = () => {
        if (source !== socket || state.closed) return;
        failPending(new Error("the connection was closed"));
        status("reconnecting");
        retry = setTimeout(() => open(true), 500);
      };
      return;
    }
    // EventSource resumes a whole collection by itself with Last-Event-ID; a fresh one starts
    // from a snapshot, unless the mirror holds a version to resume from. A windowed stream
    // starts with a snapshot of its view each time, so it is opened again here, with the
    // anchor where the daemon last held it.
    // Changesets in their compact form: without the collection, epoch and `from` the stream
    // established, and as EventSource's default event (their data says what they are).
    let address = withToken(url);
    address += (address.includes("?") ? "&" : "?") + "compact=1";
    const window = subscriptionWindow();
    if (window) {
      address += (address.includes("?") ? "&" : "?") + windowQuery(window);
    } else if (resume && state.mirror.version !== null) {
      address += (address.includes("?") ? "&" : "?") + `last_event_id=${state.mirror.epoch}:${state.mirror.version}`;
    }
    const events = new EventSource(address);
    source = events;
    for (const kind of ["message", "snapshot", "changeset", "dropped"]) {
      events.addEventListener(kind, (message) => source === events && handle(message.data));
    }
    events.addEventListener("revoked", (message) => {
      if (source !== events) return;
      events.close();
      revoked(message.data);
    });
    events.addEventListener("error", (message) => {
      if (source !== events) return;
      if (typeof message.data === "string") {
        // The daemon refused the subscription (`event: error` with its answer) and ends the stream.
        events.close();
        let answer;
        try {
          answer = JSON.parse(message.data);
        } catch {
          answer = { ok: false };
        }
        return refused(answer, () => open(false));
      }
      if (window && events.readyState !== 1) {
        events.close();
        status("reconnecting");
        retry = setTimeout(() => open(true), 500);
        return;
      }
      if (events.readyState === 2 && !opened) {
        // Refused before the stream began (401, 403): EventSource shows no status or body, so
        // the same request as a plain `get` says why.
        const headers = token ? { Authorization: `Bearer ${token}` } : {};
        fetch(url.replace(/\/events([?#].*)?$/, ""), { headers })
          .then((response) => response.json())
          .then(
            (answer) => {
              if (source !== events) return;
              if (answer.ok) {
                retry = setTimeout(() => open(true), 1000);
              } else if (answer.error && answer.error.code === "unauthorized" && typeof tokenSource === "function") {
                retry = setTimeout(() => open(true), 1000);
              } else {
                refused(answer, () => open(false));
              }
            },
            () => source === events && status("closed"),
          );
        return;
      }
      if (events.readyState === 2 && typeof tokenSource === "function") {
        // EventSource gives up on a refusal (its token expired while it was away): a fresh one.
        status("reconnecting");
        retry = setTimeout(() => open(true), 1000);
        return;
      }
      status(events.readyState === 2 ? "closed" : "reconnecting");
    });
    let opened = false;
    events.addEventListener("open", () => {
      opened = true;
      status("connected");
    });
  };
  open(false);
  return state;
}

// ---------------------------------------------------------------------------------------------
// A DOM list in step with a collection.

/**
 * Keeps `container` in step with a followed collection: one `<section>` per section holding one
 * element per item, keyed by identifier. Inserted items fade in, deleted ones fade out, items
 * that change place glide there (FLIP, the Web Animations API); an updated item is rendered
 * again in its own element. `render(item, element, section)` fills an item's element;
 * `renderSection(section, element)` a section's heading.
 *
 * With `{windowed: true}` (and a windowed `follow`), see `bindWindowedList`.
 */
export function bindList(container, followed, options = {}) {
  if (options.windowed) return bindWindowedList(container, followed, options);
  const render = options.render || ((item, element) => (element.textContent = item.id));
  const renderSection =
    options.renderSection || ((section, element) => (element.dataset.title = section.id));
  const itemElements = new Map();
  const sectionElements = new Map();
  const duration = options.duration ?? 200;
  const update = (_, mirror) => {
    const before = new Map();
    for (const [id, element] of itemElements) before.set(id, element.getBoundingClientRect());
    const keptSections = new Set();
    const keptItems = new Set();
    mirror.sections.forEach((section) => {
      let group = sectionElements.get(section.id);
      if (!group) {
        group = document.createElement("section");
        group.dataset.id = section.id;
        sectionElements.set(section.id, group);
      }
      renderSection(section, group);
      container.appendChild(group);
      keptSections.add(section.id);
      for (const item of section.items) {
        let element = itemElements.get(item.id);
        const isNew = !element;
        if (isNew) {
          element = document.createElement(options.itemTag || "li");
          element.dataset.id = item.id;
          itemElements.set(item.id, element);
        }
        if (isNew || element._data !== item.data) {
          render(item, element, section);
          element._data = item.data;
        }
        group.appendChild(element);
        keptItems.add(item.id);
        if (isNew && element.animate) element.animate([{ opacity: 0 }, { opacity: 1 }], { duration });
      }
    });
    for (const [id, element] of itemElements) {
      if (keptItems.has(id)) continue;
      itemElements.delete(id);
      element.remove();
    }
    for (const [id, group] of sectionElements) {
      if (keptSections.has(id)) continue;
      sectionElements.delete(id);
      group.remove();
    }
    // FLIP: each kept element starts where it was and glides to where it is.
    for (const [id, rect] of before) {
      const element = itemElements.get(id);
      if (!element || !element.animate) continue;
      const now = element.getBoundingClientRect();
      const dx = rect.left - now.left;
      const dy = rect.top - now.top;
      if (dx || dy) {
        element.animate([{ transform: `translate(${dx}px, ${dy}px)` }, { transform: "none" }], {
          duration,
          easing: "ease-out",
        });
      }
    }
  };
  const unsubscribe = followed.subscribe(update);
  if (followed.mirror.version !== null) update(null, followed.mirror);
  return { close: unsubscribe };
}

/**
 * A list of a big collection that holds only the rows around what is visible. `container`
 * becomes a scroll area as tall as the whole collection (`window.total` rows of `rowHeight`
 * pixels): blank spacers stand for the rows before and after the view, and the view's rows sit
 * between them, each at its own position. As the user scrolls, the window moves (`moveWindow`
 * of a windowed `follow`): to `{first: N}` near the top, `{last: N}` near the end, and else to
 * an anchor at the first visible row with `margin` rows before and after it. When that row is
 * outside the view, its identifier is looked up with `get` (windows of at most `maxWindow`
 * items, hopping from the nearest item it knows the place of). Options: `rowHeight` (28),
 * `margin` (a screenful), `maxWindow` (the daemon's max_window_items, 10,000), `render`,
 * `renderSection`, `itemTag`, `onError(error)`. Returns `{close(), settled, moves, visible()}`:
 * `settled` is true when no move is under way and the view holds the visible rows.
 */
export function bindWindowedList(container, followed, options = {}) {
  const render = options.render || ((item, element) => (element.textContent = item.id));
  const renderSection =
    options.renderSection || ((section, element) => (element.dataset.title = section.id));
  const rowHeight = options.rowHeight ?? 28;
  const maxWindow = options.maxWindow ?? 10000;
  const itemElements = new Map();
  const sectionElements = new Map();
  // Items whose place is known (roughly: places shift as the collection changes), from views
  // and lookups: where a lookup of a far row starts.
  const landmarks = new Map();
  const spacer = () => {
    const element = document.createElement("div");
    element.className = "diffcast-spacer";
    element.setAttribute("aria-hidden", "true");
    return element;
  };
  const top = spacer();
  const rows = document.createElement("div");
  const bottom = spacer();
  container.classList.add("diffcast-windowed");
  Object.assign(container.style, { overflowY: "auto", overflowAnchor: "none" });
  container.replaceChildren(top, rows, bottom);
  let closed = false;
  let busy = false;
  let timer = null;
  let failures = 0;
  // A step that moved nothing: the daemon's view already is what it asks for, but the mirror's
  // window is older (a version that leaves a view as it was sends nothing, so `offset` and
  // `total` may lag). It is not asked for again until the next event.
  let idle = null;

  /** The view's place: the mirror's window, or the whole collection for a follow without one. */
  const place = () => {
    const mirror = followed.mirror;
    if (mirror.window) return mirror.window;
    const count = mirror.sections.reduce((sum, section) => sum + section.items.length, 0);
    return { offset: 0, count, total: count };
  };
  /** The rows [first, last) the scroll area shows now, of `total`. */
  const visible = () => {
    const { total } = place();
    const first = Math.min(total, Math.max(0, Math.floor(container.scrollTop / rowHeight)));
    const last = Math.min(total, Math.max(first, Math.ceil((container.scrollTop + container.clientHeight) / rowHeight)));
    return { first, last, total };
  };

  let drawnTotal = null;
  const draw = () => {
    const mirror = followed.mirror;
    // The row at the top of the screen, to keep it there when rows come or go above it.
    const firstRow = Math.floor(container.scrollTop / rowHeight);
    let kept = null;
    if (container.scrollTop > 0) {
      for (const [id, element] of itemElements) {
        if (Number(element.dataset.row) === firstRow) {
          kept = id;
          break;
        }
      }
    }
    const { offset, count, total } = place();
    top.style.height = `${offset * rowHeight}px`;
    bottom.style.height = `${Math.max(0, total - offset - count) * rowHeight}px`;
    const keptSections = new Set();
    const keptItems = new Set();
    const groups = [];
    let position = offset;
    for (const section of mirror.sections) {
      let group = sectionElements.get(section.id);
      if (!group) {
        group = document.createElement("section");
        group.dataset.id = section.id;
        Object.assign(group.style, { margin: "0", padding: "0" });
        sectionElements.set(section.id, group);
      }
      renderSection(section, group);
      keptSections.add(section.id);
      const elements = section.items.map((item) => {
        let element = itemElements.get(item.id);
        const isNew = !element;
        if (isNew) {
          element = document.createElement(options.itemTag || "li");
          element.dataset.id = item.id;
          Object.assign(element.style, { height: `${rowHeight}px`, margin: "0", boxSizing: "border-box", overflow: "hidden" });
          itemElements.set(item.id, element);
        }
        if (isNew || element._data !== item.data) {
          render(item, element, section);
          element._data = item.data;
        }
        element.dataset.row = String(position);
        if ((position - offset) % 16 === 0) landmarks.set(item.id, position);
        position += 1;
        keptItems.add(item.id);
        return element;
      });
      group.replaceChildren(...elements);
      groups.push(group);
    }
    rows.replaceChildren(...groups);
    for (const id of itemElements.keys()) if (!keptItems.has(id)) itemElements.delete(id);
    for (const id of sectionElements.keys()) if (!keptSections.has(id)) sectionElements.delete(id);
    // Rows inserted (or deleted) above the screen push its rows down (or pull them up): scroll
    // by as much, so the screen stays on the same rows. A row that moved is not followed.
    const grew = drawnTotal === null ? 0 : total - drawnTotal;
    drawnTotal = total;
    const element = kept === null ? null : itemElements.get(kept);
    const shifted = element ? Number(element.dataset.row) - firstRow : 0;
    if (shifted !== 0 && Math.sign(shifted) === Math.sign(grew) && Math.abs(shifted) <= Math.abs(grew)) {
      container.scrollTop += shifted * rowHeight;
    }
  };

  /** The window the visible rows need, or null when the view holds them. */
  const plan = () => {
    if (followed.mirror.version === null) return null;
    const { offset, count } = place();
    const { first, last, total } = visible();
    if (total === 0) return null;
    const margin = options.margin ?? Math.max(10, Math.ceil(container.clientHeight / rowHeight));
    const slack = Math.floor(margin / 2);
    if (offset <= Math.max(0, first - slack) && offset + count >= Math.min(total, last + slack)) return null;
    const lo = Math.max(0, first - margin);
    const hi = Math.min(total, lo + maxWindow, Math.max(last, first + 1) + margin);
    if (lo === 0) return { first: hi };
    if (hi === total) return { last: total - lo };
    return { anchorAt: first, before: first - lo, after: hi - 1 - first };
  };

  /** The step to take now, or null. */
  const wanted = () => {
    const step = plan();
    return step && JSON.stringify(step) !== idle ? step : null;
  };

  const itemId = (item) => identifier(typeof item === "object" && item !== null ? item.id : item, "get");
  /** The identifier of the item at row `row` (or near it), looked up with `get`s of at most `maxWindow` items. */
  const locate = async (row) => {
    const mirror = followed.mirror;
    const { offset, count } = place();
    if (row >= offset && row < offset + count) return mirror.items[row - offset].id;
    let { total } = place();
    for (let hop = 0; hop < 64 && !closed; hop += 1) {
      row = Math.min(row, total - 1);
      if (row < 0) return null;
      // From the nearest known place: the top, the end or a landmark.
      let best = { distance: row, from: "top" };
      if (total - 1 - row < best.distance) best = { distance: total - 1 - row, from: "end" };
      for (const [id, position] of landmarks) {
        const distance = Math.abs(position - row);
        if (distance < best.distance) best = { distance, from: "landmark", id, position };
      }
      let window;
      if (best.from === "top") window = { first: Math.min(row + 1, maxWindow) };
      else if (best.from === "end") window = { last: Math.min(total - row, maxWindow) };
      else if (best.position <= row) window = { anchor: best.id, before: 0, after: Math.min(row - best.position, maxWindow - 1) };
      else window = { anchor: best.id, before: Math.min(best.position - row, maxWindow - 1), after: 0 };
      const answer = await followed.request({ op: "get", collection: followed.collection, window });
      if (!answer.ok) {
        if (best.from === "landmark" && answer.error && answer.error.code === "unknown_item") {
          landmarks.delete(best.id);
          continue;
        }
        throw refusal(answer, "get");
      }
      const ids = (answer.sections || []).flatMap((section) => (section.items || []).map(itemId));
      const at = answer.window.offset;
      total = answer.window.total;
      ids.forEach((id, i) => (i % 64 === 0 || i === ids.length - 1) && landmarks.set(id, at + i));
      if (landmarks.size > 100000) landmarks.clear();
      if (row >= at && row < at + ids.length) return ids[row - at];
      if (!ids.length) return null;
    }
    return null;
  };

  const check = async () => {
    timer = null;
    if (busy || closed) return;
    busy = true;
    let failed = false;
    try {
      for (let round = 0; round < 8 && !closed; round += 1) {
        const step = wanted();
        if (!step) break;
        let window = step;
        if ("anchorAt" in step) {
          const id = await locate(step.anchorAt);
          if (id === null || closed) break;
          window = { anchor: id, before: step.before, after: step.after };
        }
        binder.moves += 1;
        const updates = followed.versions;
        await followed.moveWindow(window);
        if (followed.versions === updates) {
          idle = JSON.stringify(step);
          break;
        }
      }
      failures = 0;
    } catch (error) {
      // A refused move (its anchor went away meanwhile) or a lost connection: try again soon.
      failed = true;
      failures += 1;
      binder.error = error;
      if (options.onError) options.onError(error);
    } finally {
      busy = false;
    }
    if (closed) return;
    if (failed) timer = setTimeout(check, Math.min(2000, 100 * 2 ** failures));
    else if (wanted()) schedule();
  };
  const schedule = () => {
    if (!timer && !busy && !closed) timer = setTimeout(check, 16);
  };

  const update = () => {
    idle = null;
    draw();
    schedule();
  };
  const unsubscribe = followed.subscribe(update);
  container.addEventListener("scroll", schedule, { passive: true });
  const resize = typeof ResizeObserver === "function" ? new ResizeObserver(schedule) : null;
  if (resize) resize.observe(container);
  const binder = {
    moves: 0,
    error: null,
    visible,
    /** No move under way or due, and the view holds the visible rows. */
    get settled() {
      return !busy && !timer && followed.mirror.version !== null && wanted() === null;
    },
    close() {
      closed = true;
      clearTimeout(timer);
      unsubscribe();
      container.removeEventListener("scroll", schedule);
      if (resize) resize.disconnect();
    },
  };
  if (followed.mirror.version !== null) update();
  return binder;
}

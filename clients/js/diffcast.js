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
          object[key] = raw === "null" ? null : new Data(raw);
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
    this.window = null;
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
        if (event.epoch !== this.epoch) throw new Divergence(`epoch ${event.epoch} is not ${this.epoch}`);
        if (event.from !== this.version) {
          throw new Divergence(`chain broken: changeset from ${event.from} but the mirror holds ${this.version}`);
        }
        const sections = applyChangeset(this.sections, event);
        this.check(sections, event.digest);
        this.commit(event, sections);
        return { kind: "changeset", changeset: event };
      }
      case "dropped":
        this.epoch = null;
        this.version = null;
        this.sections = [];
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
    this.epoch = event.epoch;
    this.version = event.version;
    this.sections = sections;
    this.window = event.window || null;
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

/**
 * Follows a collection and keeps a verified mirror of it. `url` is the events endpoint
 * (`/v1/collections/NAME/events`, over Server-Sent Events) or, with `{transport: "websocket"}`,
 * the WebSocket endpoint (`/v1/ws`) and `{collection}`. Options: `onChange(update, mirror)`,
 * `onDivergence(error)`, `onStatus(text)`, `token`. Returns `{mirror, close()}` and is an
 * EventTarget-like object for `bindList`.
 */
export function follow(url, options = {}) {
  const listeners = new Set();
  const state = {
    mirror: new Mirror(),
    divergences: 0,
    versions: 0,
    closed: false,
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    close() {
      state.closed = true;
      if (source) source.close();
    },
  };
  const emit = (update) => {
    state.versions += 1;
    for (const listener of listeners) listener(update, state.mirror);
    if (options.onChange) options.onChange(update, state.mirror);
  };
  const status = (text) => options.onStatus && options.onStatus(text);
  let source = null;
  const handle = (text) => {
    try {
      emit(state.mirror.apply(parseEvent(text)));
    } catch (error) {
      if (!(error instanceof Divergence)) throw error;
      state.divergences += 1;
      if (options.onDivergence) options.onDivergence(error);
      // Subscribe again without a position: a snapshot puts the mirror right.
      state.mirror = new Mirror();
      open(false);
    }
  };
  const withToken = (address) => {
    if (!options.token) return address;
    return address + (address.includes("?") ? "&" : "?") + "token=" + encodeURIComponent(options.token);
  };
  const open = (resume) => {
    if (state.closed) return;
    if (source) source.close();
    if (options.transport === "websocket") {
      const socket = new WebSocket(withToken(url));
      source = socket;
      socket.onopen = () => {
        const request = { op: "subscribe", collection: options.collection };
        if (resume && state.mirror.version !== null) {
          request.since = state.mirror.version;
          request.epoch = state.mirror.epoch;
        }
        socket.send(JSON.stringify(request));
        status("connected");
      };
      socket.onmessage = (message) => {
        if (message.data.startsWith('{"event"')) handle(message.data);
      };
      socket.onclose = () => {
        if (source !== socket || state.closed) return;
        status("reconnecting");
        setTimeout(() => open(true), 500);
      };
      return;
    }
    // EventSource resumes by itself with Last-Event-ID; a fresh one starts from a snapshot,
    // unless the mirror holds a version to resume from.
    let address = withToken(url);
    if (resume && state.mirror.version !== null) {
      address += (address.includes("?") ? "&" : "?") + `last_event_id=${state.mirror.epoch}:${state.mirror.version}`;
    }
    const events = new EventSource(address);
    source = events;
    for (const kind of ["snapshot", "changeset", "dropped"]) {
      events.addEventListener(kind, (message) => source === events && handle(message.data));
    }
    events.addEventListener("error", () => status(events.readyState === 2 ? "closed" : "reconnecting"));
    events.addEventListener("open", () => status("connected"));
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
 */
export function bindList(container, followed, options = {}) {
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

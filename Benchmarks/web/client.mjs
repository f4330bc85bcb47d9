// The web benchmark's two processes (bench_web.py starts them; no npm dependencies):
//
//   node client.mjs subscribe '{"server":"diffcast"|"nchan"|"nats","transport":"sse"|"ws","port":P,...}'
//     S subscribers on raw TCP sockets, each counting the items of its complete events (an SSE
//     event ends with a blank line, a WebSocket message with its frame): one `"id":"i` per item,
//     counted over all the complete events of a read at once with Buffer.indexOf (memmem), and
//     the time of every read that completed items, for the latencies. Every socket reads into
//     one shared buffer (net's `onread`: no allocation per read). Prints {"ready":…} once every
//     subscriber is set up, {"delivered":…} when every subscriber has every item (or when
//     nothing arrives for `stallSeconds`), then, on "report SENT_TIMES LATENCIES" from stdin,
//     writes every delivery's latency (sorted) and prints the counts and checks as JSON.
//     nats-server's WebSocket listener carries the NATS protocol as a byte stream whose frame
//     boundaries need not fall between messages: its subscribers take the frames' payloads out,
//     then count the items in complete `MSG feed 1 N\r\n<N bytes>\r\n` messages the same way.
//
//   node client.mjs publish '{"server":…,"socket":PATH,"messages":M,"window":W,...}'
//     One connection on the server's Unix socket: M writes of one item each, pipelined, at most W
//     unanswered (Diffcast: append_items lines; Nchan: HTTP/1.1 POSTs on one keep-alive
//     connection; nats-server: core NATS `PUB feed N` each followed by a PING on its TCP client
//     port, the PONG standing for the write's answer, as core NATS has none). Prints {"connected":true}, starts on "go" from stdin, writes the send time of
//     every message to `sendTimes` (Float64, ms on CLOCK_MONOTONIC: process.hrtime, the
//     subscriber's clock too) and prints its figures.
//
// The same code reads every server: only the request that opens a subscription differs (and,
// for nats-server, taking the NATS stream out of the frames).

import fs from "node:fs";
import net from "node:net";

const mode = process.argv[2];
const options = JSON.parse(process.argv[3]);

/** Milliseconds on CLOCK_MONOTONIC (process.hrtime is uv_hrtime), the same in both processes. */
function now() {
  const [seconds, nanoseconds] = process.hrtime();
  return seconds * 1e3 + nanoseconds / 1e6;
}

function say(object) {
  process.stdout.write(JSON.stringify(object) + "\n");
}

function onStdinLine(handler) {
  let text = "";
  process.stdin.setEncoding("utf8");
  process.stdin.on("data", (chunk) => {
    text += chunk;
    let newline;
    while ((newline = text.indexOf("\n")) >= 0) {
      const line = text.slice(0, newline).trim();
      text = text.slice(newline + 1);
      handler(line);
    }
  });
}

/** The item's text: `{"id":"i<index>","data":"xxx…"}`, ~`bytes` bytes in all. */
function itemText(index, bytes) {
  const head = `{"id":"i${index}","data":"`;
  return head + "x".repeat(Math.max(1, bytes - head.length - 2)) + '"}';
}

// ---------------------------------------------------------------------------------------------
// Subscribers

const MARKER = Buffer.from('"id":"i');
const EVENT_END = Buffer.from("\n\n");
const HEAD_END = Buffer.from("\r\n\r\n");
const CRLF = Buffer.from("\r\n");

/** A client frame (masked, with a zero key: the payload as written) of a WebSocket text message. */
function maskedFrame(opcode, payload) {
  const body = Buffer.from(payload);
  let head;
  if (body.length < 126) head = Buffer.from([0x80 | opcode, 0x80 | body.length]);
  else {
    head = Buffer.alloc(4);
    head[0] = 0x80 | opcode;
    head[1] = 0x80 | 126;
    head.writeUInt16BE(body.length, 2);
  }
  return Buffer.concat([head, Buffer.alloc(4), body]);
}

function subscribe() {
  const { server, transport, host = "127.0.0.1", port, subscribers: count, messages } = options;
  // Diffcast's subscribers ask for compact changesets, as the JavaScript client does, unless
  // `compact` is false.
  const form = options.compact === false ? "" : "?compact=1";
  const path =
    options.path ??
    (server === "diffcast"
      ? transport === "sse"
        ? `/v1/collections/feed/events${form}`
        : `/v1/ws${form}`
      : server === "nats"
        ? "/"
        : "/sub/feed");
  const request =
    transport === "sse"
      ? `GET ${path} HTTP/1.1\r\nHost: ${host}:${port}\r\nAccept: text/event-stream\r\nCache-Control: no-cache\r\n\r\n`
      : `GET ${path} HTTP/1.1\r\nHost: ${host}:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
        `Sec-WebSocket-Key: ZGlmZmNhc3QtYmVuY2htYXJr\r\nSec-WebSocket-Version: 13\r\n\r\n`;
  // Diffcast sends the snapshot before anything else (and over a WebSocket, the subscribe
  // request's answer after it): a subscriber is set up once it has them. Nchan's subscriber is in
  // its channel once the response head is out, followed over SSE by a `: hi` comment
  // (bench_web.py also checks Nchan's count of subscribers).
  const setupMessages = transport === "sse" ? 1 : server === "diffcast" ? 2 : 0;
  // nats-server: CONNECT, SUB and a PING; its PONG says the subscription is in place.
  const nats = server === "nats";
  const subscribeFrame =
    server === "diffcast" && transport === "ws"
      ? maskedFrame(1, JSON.stringify({ op: "subscribe", collection: "feed" }))
      : nats
        ? maskedFrame(2, 'CONNECT {"verbose":false,"pedantic":false}\r\nSUB feed 1\r\nPING\r\n')
        : null;
  const sse = transport === "sse";

  // Every read that completed items: the subscriber's count before it, the items, the time.
  let capacity = 1 << 16;
  let recordFirst = new Int32Array(capacity);
  let recordItems = new Int32Array(capacity);
  let recordTime = new Float64Array(capacity);
  let records = 0;
  function record(first, items, time) {
    if (records === capacity) {
      capacity *= 2;
      const grow = (old, Type) => {
        const array = new Type(capacity);
        array.set(old);
        return array;
      };
      recordFirst = grow(recordFirst, Int32Array);
      recordItems = grow(recordItems, Int32Array);
      recordTime = grow(recordTime, Float64Array);
    }
    recordFirst[records] = first;
    recordItems[records] = items;
    recordTime[records] = time;
    records++;
  }

  const readBuffer = Buffer.allocUnsafe(1 << 16);
  const states = [];
  let ready = 0;
  let complete = 0;
  let delivered = 0;
  let lastDelivery = 0;
  let lastProgress = 0;
  let failures = [];
  let onAllReady;
  let finished = false;

  /** The end of the last complete WebSocket frame in `buffer` (0 if none); counts frames. */
  function framesEnd(state, buffer, socket) {
    let at = 0;
    const length = buffer.length;
    while (at + 2 <= length) {
      const first = buffer[at];
      let payload = buffer[at + 1] & 127;
      let head = 2;
      if (payload === 126) {
        if (at + 4 > length) break;
        payload = buffer.readUInt16BE(at + 2);
        head = 4;
      } else if (payload === 127) {
        if (at + 10 > length) break;
        payload = buffer.readUInt32BE(at + 2) * 4294967296 + buffer.readUInt32BE(at + 6);
        head = 10;
      }
      if (buffer[at + 1] & 128) head += 4;
      if (at + head + payload > length) break;
      const opcode = first & 15;
      if (opcode === 8) state.closedByServer = true;
      else if (opcode === 9) socket.write(maskedFrame(10, buffer.subarray(at + head, at + head + payload)));
      else if (nats) {
        if (opcode === 0 || opcode === 1 || opcode === 2) state.payloads.push(buffer.subarray(at + head, at + head + payload));
      } else if (opcode !== 10 && first & 0x80) state.messages++;
      at += head + payload;
    }
    return at;
  }

  function onData(state, socket, chunk) {
    state.bytes += chunk.length;
    let buffer = state.pending === null ? chunk : Buffer.concat([state.pending, chunk]);
    state.pending = null;
    if (state.head) {
      const end = buffer.indexOf(HEAD_END);
      if (end < 0) {
        state.pending = Buffer.from(buffer);
        return;
      }
      const status = buffer.toString("latin1", 0, Math.min(end, 200)).split("\r\n")[0];
      if (!/^HTTP\/1\.1 (200|101)/.test(status)) {
        fail(state, `response ${status}`);
        return;
      }
      state.head = false;
      buffer = buffer.subarray(end + 4);
      if (subscribeFrame) socket.write(subscribeFrame);
      if (!nats && !state.ready && state.messages >= setupMessages) setUp(state);
      if (buffer.length === 0) return;
    }
    let end;
    if (nats) {
      // The frames' payloads, after what was left of the NATS stream, are the stream to count in.
      const framed = framesEnd(state, buffer, socket);
      if (framed < buffer.length) state.pending = Buffer.from(buffer.subarray(framed));
      if (state.payloads.length === 0) return;
      const parts = state.payloads;
      state.payloads = [];
      if (state.proto !== null) parts.unshift(state.proto);
      buffer = parts.length === 1 ? parts[0] : Buffer.concat(parts);
      state.proto = null;
      end = natsEnd(state, buffer, socket);
      if (end < buffer.length) state.proto = Buffer.from(buffer.subarray(end));
      if (!state.ready && state.pongs > 0) setUp(state);
    } else if (sse) {
      const last = buffer.lastIndexOf(EVENT_END);
      end = last < 0 ? 0 : last + 2;
      for (let at = buffer.indexOf(EVENT_END); at >= 0 && at < end; at = buffer.indexOf(EVENT_END, at + 2))
        state.messages++;
    } else end = framesEnd(state, buffer, socket);
    // The read buffer is shared by every socket: an incomplete tail is copied out.
    if (!nats && end < buffer.length) state.pending = Buffer.from(buffer.subarray(end));
    if (end === 0) return;
    let items = 0;
    for (let at = buffer.indexOf(MARKER); at >= 0 && at < end; at = buffer.indexOf(MARKER, at + 7)) items++;
    if (items > 0) {
      const time = now();
      record(state.count, items, time);
      state.count += items;
      // The last item's number: `"id":"i<digits>"`.
      let number = 0;
      for (let at = buffer.lastIndexOf(MARKER, end - 1) + MARKER.length; ; at++) {
        const byte = buffer[at];
        if (byte < 48 || byte > 57) break;
        number = number * 10 + byte - 48;
      }
      state.last = number;
      delivered += items;
      lastDelivery = time;
      if (state.count >= messages && !state.complete) {
        state.complete = true;
        complete++;
        if (complete === states.length) finish(true);
      }
    }
    if (!nats && !state.ready && state.messages >= setupMessages) setUp(state);
  }

  /** The end of the last complete NATS protocol message in `buffer` (a MSG with its payload);
   * counts MSGs, answers PINGs, notes PONGs and errors. */
  function natsEnd(state, buffer, socket) {
    let at = 0;
    const length = buffer.length;
    for (;;) {
      const eol = buffer.indexOf(CRLF, at);
      if (eol < 0) break;
      const b0 = buffer[at];
      if (b0 === 0x4d /* MSG */) {
        // MSG <subject> <sid> [reply] <bytes>
        let size = 0;
        let scale = 1;
        for (let k = eol - 1; k > at; k--) {
          const byte = buffer[k];
          if (byte < 48 || byte > 57) break;
          size += (byte - 48) * scale;
          scale *= 10;
        }
        const next = eol + 2 + size + 2;
        if (next > length) break;
        state.messages++;
        at = next;
        continue;
      }
      if (b0 === 0x50 /* PING or PONG */) {
        if (buffer[at + 1] === 0x49) socket.write(maskedFrame(2, "PONG\r\n"));
        else state.pongs++;
      } else if (b0 === 0x2d /* -ERR */) fail(state, buffer.toString("latin1", at, eol));
      at = eol + 2;
    }
    return at;
  }

  function setUp(state) {
    state.ready = true;
    state.setupMessages = state.messages;
    state.bytes = state.pending === null ? 0 : state.pending.length;
    ready++;
    if (ready === states.length && onAllReady) onAllReady();
  }

  function fail(state, why) {
    failures.push(`subscriber ${state.index}: ${why}`);
    state.failed = true;
  }

  function open(index) {
    return new Promise((resolve, reject) => {
      const state = {
        index,
        head: true,
        pending: null,
        bytes: 0,
        count: 0,
        messages: 0,
        setupMessages: 0,
        ready: false,
        complete: false,
        last: null,
        failed: false,
        closedByServer: false,
        payloads: [],
        proto: null,
        pongs: 0,
      };
      states.push(state);
      // Every socket reads into the same buffer (no allocation per read): onData copies out
      // what it keeps.
      const socket = net.connect({
        host,
        port,
        onread: { buffer: readBuffer, callback: (length, buffer) => onData(state, socket, buffer.subarray(0, length)) },
      });
      socket.setNoDelay(true);
      socket.on("connect", () => {
        socket.write(request);
        resolve();
      });
      socket.on("error", (error) => {
        fail(state, error.message);
        reject(error);
      });
      socket.on("close", () => {
        if (!state.complete && !finished) fail(state, "closed by the server");
      });
    });
  }

  function lastId(state) {
    return state.last === null ? null : `i${state.last}`;
  }

  function finish(allDelivered) {
    if (finished) return;
    finished = true;
    say({ delivered: allDelivered, deliveries: delivered, failures: failures.slice(0, 5) });
  }

  /** Every delivery's latency, sorted, into `latenciesPath` (Float64, ms); the counts as JSON. */
  function report(sendTimesPath, latenciesPath) {
    // A small file's Buffer is a slice of a shared pool: copy out its own bytes.
    const raw = fs.readFileSync(sendTimesPath);
    const sent = new Float64Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.length));
    const latencies = new Float64Array(delivered);
    let k = 0;
    for (let r = 0; r < records; r++) {
      const first = recordFirst[r];
      const time = recordTime[r];
      const end = Math.min(first + recordItems[r], sent.length);
      for (let item = first; item < end; item++) latencies[k++] = time - sent[item];
    }
    const sorted = latencies.subarray(0, k).sort();
    fs.writeFileSync(latenciesPath, Buffer.from(sorted.buffer, 0, k * 8));
    const expectedLast = `i${messages - 1}`;
    const wrong = states.filter((state) => state.count !== messages || lastId(state) !== expectedLast);
    let bytes = 0;
    let events = 0;
    for (const state of states) {
      bytes += state.bytes;
      events += state.messages - state.setupMessages;
    }
    say({
      subscribers: states.length,
      deliveries: delivered,
      firstSent: sent[0],
      lastDelivery,
      reads: records,
      events,
      bytes,
      wrong: wrong.length,
      examples: wrong.slice(0, 3).map((state) => ({ index: state.index, count: state.count, last: lastId(state) })),
      failures: failures.slice(0, 5),
    });
    process.exit(0);
  }

  onStdinLine((line) => {
    const [command, sendTimes, latencies] = line.split(" ");
    if (command === "report") report(sendTimes, latencies);
  });

  (async () => {
    const allReady = new Promise((resolve) => (onAllReady = resolve));
    // Connections in waves, so no listen backlog overflows.
    const wave = options.wave ?? 100;
    for (let first = 0; first < count; first += wave) {
      const opening = [];
      for (let index = first; index < Math.min(count, first + wave); index++) opening.push(open(index));
      await Promise.all(opening);
    }
    if (ready < states.length) await allReady;
    say({ ready: true, subscribers: states.length });
    // Nothing arriving for stallSeconds after the first delivery (or 3 × that before it) ends it.
    const stall = (options.stallSeconds ?? 10) * 1e3;
    let seen = 0;
    lastProgress = now();
    const started = lastProgress;
    const timer = setInterval(() => {
      if (finished) return clearInterval(timer);
      if (delivered !== seen) {
        seen = delivered;
        lastProgress = now();
      } else if (now() - lastProgress > (delivered ? stall : 3 * stall) && now() - started > stall) {
        clearInterval(timer);
        finish(false);
      }
    }, 200);
  })().catch((error) => {
    say({ error: error.message });
    process.exit(1);
  });
}

// ---------------------------------------------------------------------------------------------
// The publisher

function publish() {
  const { server, socket: path, port, messages, window, bytes = 100, channel = "feed" } = options;
  const sent = new Float64Array(messages);
  const request =
    server === "diffcast"
      ? (index) => `{"op":"append_items","collection":"${channel}","items":[${itemText(index, bytes)}]}\n`
      : server === "nats"
        ? (index) => {
            // Core NATS answers no PUB: the PING after it is answered once the server has
            // handled the PUB (routed it to every subscriber's outbound buffer), in order.
            const body = itemText(index, bytes);
            return `PUB ${channel} ${body.length}\r\n${body}\r\nPING\r\n`;
          }
        : (index) => {
          const body = itemText(index, bytes);
          return (
            `POST /pub/${channel} HTTP/1.1\r\nHost: nchan\r\nContent-Type: application/json\r\n` +
            `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
          );
        };
  const REJECTED = Buffer.from('"ok":false');
  const STATUS = Buffer.from("HTTP/1.1 ");
  const PONG = Buffer.from("PONG\r\n");
  const ERROR = Buffer.from("-ERR");
  const socket = port ? net.connect({ host: "127.0.0.1", port }) : net.connect({ path });
  socket.setNoDelay(true);
  let handshaken = server !== "nats";
  let next = 0;
  let acknowledged = 0;
  let rejected = 0;
  let tail = null;
  let lastAnswer = "";
  let sends = 0;
  let cpuAtGo = null;

  function pump() {
    if (cpuAtGo === null || next >= messages || next - acknowledged >= window) return;
    const end = Math.min(messages, acknowledged + window);
    let batch = "";
    for (let index = next; index < end; index++) batch += request(index);
    const time = now();
    sent.fill(time, next, end);
    socket.write(batch);
    sends++;
    next = end;
  }

  socket.on("data", (chunk) => {
    let answers = 0;
    if (server === "diffcast") {
      // A line is an answer; a rejected write's says "ok":false.
      let lastAt = -1;
      for (let at = chunk.indexOf(10); at >= 0; at = chunk.indexOf(10, at + 1)) {
        answers++;
        lastAt = at;
      }
      for (let at = chunk.indexOf(REJECTED); at >= 0; at = chunk.indexOf(REJECTED, at + 1)) rejected++;
      if (lastAt >= 0) lastAnswer = chunk.toString("utf8", chunk.lastIndexOf(10, lastAt - 1) + 1, lastAt);
    } else if (server === "nats") {
      // A PONG is an answer; an -ERR a rejection (the INFO line before them is neither).
      const buffer = tail === null ? chunk : Buffer.concat([tail, chunk]);
      for (let at = buffer.indexOf(PONG); at >= 0; at = buffer.indexOf(PONG, at + 6)) answers++;
      for (let at = buffer.indexOf(ERROR); at >= 0; at = buffer.indexOf(ERROR, at + 4)) {
        rejected++;
        lastAnswer = buffer.toString("latin1", at, Math.max(at, buffer.indexOf(10, at)));
      }
      if (answers > 0) lastAnswer = "PONG";
      const lastLine = buffer.lastIndexOf(10);
      tail = buffer.subarray(lastLine + 1).length ? Buffer.from(buffer.subarray(lastLine + 1)) : null;
      if (!handshaken && answers > 0) {
        // The PONG of the CONNECT's PING: connected.
        handshaken = true;
        answers--;
        connected();
      }
    } else {
      // A status line is an answer (Nchan's body, its channel summary, has none): 2xx or not.
      const buffer = tail === null ? chunk : Buffer.concat([tail, chunk]);
      let consumed = 0;
      let at = buffer.indexOf(STATUS);
      for (; at >= 0 && at + 12 <= buffer.length; at = buffer.indexOf(STATUS, at + 12)) {
        answers++;
        if (buffer[at + 9] !== 0x32) rejected++;
        lastAnswer = buffer.toString("latin1", at, at + 12);
        consumed = at + 12;
      }
      tail = at >= 0 ? buffer.subarray(at) : buffer.subarray(Math.max(consumed, buffer.length - 8));
    }
    acknowledged += answers;
    if (acknowledged >= messages) done();
    else pump();
  });
  socket.on("error", (error) => {
    say({ error: error.message });
    process.exit(1);
  });

  function done() {
    fs.writeFileSync(options.sendTimes, Buffer.from(sent.buffer));
    const version = /"version":(\d+)/.exec(lastAnswer);
    say({
      published: acknowledged,
      rejected,
      sends,
      first: sent[0],
      seconds: (now() - sent[0]) / 1e3,
      lastVersion: version ? Number(version[1]) : null,
      lastAnswer,
      cpu: process.cpuUsage(cpuAtGo),
    });
    socket.end();
    process.exit(0);
  }

  socket.on("connect", () => {
    if (server === "nats") socket.write('CONNECT {"verbose":false,"pedantic":false}\r\nPING\r\n');
    if (handshaken) connected();
  });

  function connected() {
    say({ connected: true });
    onStdinLine((line) => {
      if (line === "go") {
        cpuAtGo = process.cpuUsage();
        pump();
      }
    });
  }
}

if (mode === "subscribe") subscribe();
else if (mode === "publish") publish();
else {
  console.error("usage: node client.mjs subscribe|publish JSON");
  process.exit(2);
}

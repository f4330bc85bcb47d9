// What the node tests share: the real daemon (DIFFCASTD, else .build/debug/diffcastd) in a
// temporary folder, a line client on its Unix socket, a small WebSocket client for `follow`
// (node 20 has no global WebSocket), and a seeded generator. (node --test runs this file too:
// it holds no tests.)
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import crypto from "node:crypto";
import net from "node:net";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
export const daemonBinary = process.env.DIFFCASTD || path.join(root, ".build/debug/diffcastd");

/** Resolves when `condition()` holds (polled), rejects after `timeout` ms naming `what`. */
export async function until(condition, what, timeout = 10000) {
  const deadline = Date.now() + timeout;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeout} ms`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** A line client on the daemon's Unix socket: responses and events as text lines. */
export class LineClient {
  constructor(socketPath) {
    this.lines = [];
    this.waiters = [];
    this.buffer = "";
    this.socket = net.createConnection(socketPath);
    this.socket.setEncoding("utf8");
    this.socket.on("data", (chunk) => {
      this.buffer += chunk;
      let newline;
      while ((newline = this.buffer.indexOf("\n")) >= 0) {
        this.lines.push(this.buffer.slice(0, newline));
        this.buffer = this.buffer.slice(newline + 1);
      }
      this.wake();
    });
  }
  wake() {
    for (const waiter of this.waiters.splice(0)) waiter();
  }
  /** Resolves when a line arrives (or at once when `timeout` passes: false). */
  arrival(timeout = 10000) {
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(false), timeout);
      this.waiters.push(() => (clearTimeout(timer), resolve(true)));
    });
  }
  async next(predicate) {
    for (;;) {
      const index = this.lines.findIndex(predicate);
      if (index >= 0) return this.lines.splice(index, 1)[0];
      if (!(await this.arrival())) throw new Error("no line within 10 s");
    }
  }
  async request(line) {
    return JSON.parse(await this.requestText(line));
  }
  async requestText(line) {
    this.socket.write((typeof line === "string" ? line : JSON.stringify(line)) + "\n");
    return this.next((text) => text.startsWith('{"ok"'));
  }
  event() {
    return this.next((text) => text.startsWith('{"event"'));
  }
  /** The event lines received so far, taken out in order. */
  takeEvents() {
    const events = this.lines.filter((text) => text.startsWith('{"event"'));
    this.lines = this.lines.filter((text) => !text.startsWith('{"event"'));
    return events;
  }
  close() {
    this.socket.end();
  }
}

/** A free TCP port on loopback. */
export function freePort() {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/**
 * Runs `body(socketPath, httpPort, daemon)` against a fresh daemon (with --http when `http`,
 * and `args` besides).
 */
export async function withDaemon(body, { http = false, args: extra = [] } = {}) {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), "diffcast-js-"));
  const socketPath = path.join(directory, "d.sock");
  const port = http ? await freePort() : null;
  const args = ["--socket", socketPath, ...(http ? ["--http", `127.0.0.1:${port}`] : []), ...extra];
  const daemon = spawn(daemonBinary, args, { stdio: "ignore" });
  try {
    for (let tries = 0; !fs.existsSync(socketPath); tries += 1) {
      assert.ok(tries < 200, "the daemon did not start");
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    if (http) {
      for (let tries = 0; ; tries += 1) {
        const open = await new Promise((resolve) => {
          const probe = net.createConnection(port, "127.0.0.1");
          probe.on("connect", () => (probe.destroy(), resolve(true)));
          probe.on("error", () => resolve(false));
        });
        if (open) break;
        assert.ok(tries < 200, "the daemon's HTTP port did not open");
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
    }
    await body(socketPath, port, daemon);
  } finally {
    daemon.kill();
    fs.rmSync(directory, { recursive: true, force: true });
  }
}

/** splitmix64 in BigInt: the same writes on every run. */
export function generator(seed) {
  let state = BigInt(seed);
  return (bound) => {
    state = (state + 0x9e3779b97f4a7c15n) & 0xffffffffffffffffn;
    let z = state;
    z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & 0xffffffffffffffffn;
    z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & 0xffffffffffffffffn;
    return Number((z ^ (z >> 31n)) % BigInt(bound));
  };
}

/**
 * Just enough of the browser's WebSocket for `follow` (text messages, RFC 6455 over node:net).
 * Tests steer it with the class's statics: `instances` (every socket made, with the texts it
 * sent in `sent`), `refuse` (new sockets close at once: the daemon is unreachable) and
 * `damage` (a function applied to the text of the next event received).
 */
export class TestWebSocket {
  static instances = [];
  static refuse = false;
  static damage = null;

  constructor(url) {
    TestWebSocket.instances.push(this);
    this.url = url;
    this.readyState = 0;
    this.sent = [];
    const { hostname, port, pathname } = new URL(url);
    this.socket = net.createConnection(Number(port), hostname);
    let buffer = Buffer.alloc(0);
    let open = false;
    let message = [];
    const key = crypto.randomBytes(16).toString("base64");
    this.socket.on("connect", () => {
      if (TestWebSocket.refuse) return this.socket.destroy();
      this.socket.write(
        `GET ${pathname} HTTP/1.1\r\nHost: ${hostname}:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
          `Sec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n\r\n`,
      );
    });
    this.socket.on("data", (chunk) => {
      buffer = Buffer.concat([buffer, chunk]);
      if (!open) {
        const end = buffer.indexOf("\r\n\r\n");
        if (end < 0) return;
        if (!buffer.subarray(0, end).toString().startsWith("HTTP/1.1 101")) return this.socket.destroy();
        buffer = buffer.subarray(end + 4);
        open = true;
        this.readyState = 1;
        if (this.onopen) this.onopen();
      }
      for (;;) {
        if (buffer.length < 2) return;
        const fin = buffer[0] & 0x80;
        const opcode = buffer[0] & 0x0f;
        let length = buffer[1] & 0x7f;
        let at = 2;
        if (length === 126) {
          if (buffer.length < 4) return;
          length = buffer.readUInt16BE(2);
          at = 4;
        } else if (length === 127) {
          if (buffer.length < 10) return;
          length = Number(buffer.readBigUInt64BE(2));
          at = 10;
        }
        if (buffer.length < at + length) return;
        const payload = buffer.subarray(at, at + length);
        buffer = buffer.subarray(at + length);
        if (opcode === 0x8) return this.socket.destroy();
        if (opcode === 0x9) {
          this.frame(0xa, payload);
          continue;
        }
        if (opcode === 0x1 || opcode === 0x0) message.push(payload);
        if (fin && (opcode === 0x1 || opcode === 0x0)) {
          let text = Buffer.concat(message).toString("utf8");
          message = [];
          if (TestWebSocket.damage && text.startsWith('{"event"')) {
            text = TestWebSocket.damage(text);
            TestWebSocket.damage = null;
          }
          if (this.onmessage) this.onmessage({ data: text });
        }
      }
    });
    this.socket.on("error", () => {});
    this.socket.on("close", () => {
      this.readyState = 3;
      if (this.onclose) this.onclose();
    });
  }
  frame(opcode, payload) {
    const mask = crypto.randomBytes(4);
    const length = payload.length;
    const head =
      length < 126
        ? Buffer.from([0x80 | opcode, 0x80 | length])
        : length < 65536
          ? Buffer.from([0x80 | opcode, 0x80 | 126, length >> 8, length & 0xff])
          : Buffer.concat([Buffer.from([0x80 | opcode, 0x80 | 127]), (() => {
              const size = Buffer.alloc(8);
              size.writeBigUInt64BE(BigInt(length));
              return size;
            })()]);
    const masked = Buffer.from(payload.map((byte, i) => byte ^ mask[i % 4]));
    this.socket.write(Buffer.concat([head, mask, masked]));
  }
  send(text) {
    if (this.readyState !== 1) throw new Error("the WebSocket is not open");
    this.sent.push(text);
    this.frame(0x1, Buffer.from(text, "utf8"));
  }
  close() {
    this.readyState = 3;
    this.socket.destroy();
  }
}

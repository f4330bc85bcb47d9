// `follow` with capability tokens (SPEC.md "Scoped access") against the real daemon: tokens are
// minted here with node's own HMAC, not by the daemon; the token goes in an `auth` line, a
// token function is asked again before expiry and after a revocation, and the mirror resumes
// with one changeset, never a second snapshot.
import assert from "node:assert/strict";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import test from "node:test";

import { follow, tokenExpiry } from "../diffcast.js";
import { LineClient, TestWebSocket, until, withDaemon } from "./support.mjs";

const base64url = (bytes) => Buffer.from(bytes).toString("base64url");

/** An HS256 JWT of `claims`, signed with `secret` under `kid`. */
function mint(secret, kid, claims) {
  const head = base64url(JSON.stringify({ alg: "HS256", typ: "JWT", kid }));
  const body = base64url(JSON.stringify(claims));
  const signature = crypto.createHmac("sha256", secret).update(`${head}.${body}`).digest();
  return `${head}.${body}.${base64url(signature)}`;
}

function writeKeys(file, keys) {
  fs.writeFileSync(file, JSON.stringify({ keys: keys.map(([kid, secret]) => ({ kty: "oct", kid, alg: "HS256", k: base64url(secret) })) }));
}

/** Runs `body(keyFile)` with a key set of `keys` ([kid, secret] pairs) written to a temporary file. */
async function withKeyFile(keys, body) {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), "diffcast-keys-"));
  const keyFile = path.join(directory, "keys.json");
  writeKeys(keyFile, keys);
  try {
    await body(keyFile);
  } finally {
    fs.rmSync(directory, { recursive: true, force: true });
  }
}

const aliceReads = (seconds) => ({ sub: "alice", exp: Math.floor(Date.now() / 1000) + seconds, diffcast: { read: ["inbox.alice"] } });

test("tokenExpiry reads exp", () => {
  assert.equal(tokenExpiry(mint("s", "k", { exp: 1234 })), 1234);
  assert.equal(tokenExpiry("not a token"), null);
  assert.equal(tokenExpiry(mint("s", "k", { sub: "x" })), null);
});

test("a token function is asked again before expiry, over the same WebSocket, in an auth line", async () => {
  const secret = crypto.randomBytes(32);
  await withKeyFile([["k1", secret]], (keyFile) =>
    withDaemon(
      async (socketPath, port) => {
        const writer = new LineClient(socketPath);
        await writer.request('apply inbox.alice {"sections":[{"id":"s","items":["a0"]}]}');
        let asked = 0;
        const kinds = [];
        TestWebSocket.instances = [];
        const followed = follow(`ws://127.0.0.1:${port}/v1/ws`, {
          transport: "websocket",
          collection: "inbox.alice",
          WebSocket: TestWebSocket,
          token: async () => ((asked += 1), mint(secret, "k1", aliceReads(3))),
          onChange: (update) => kinds.push(update.kind),
        });
        await until(() => followed.mirror.version === 1, "the snapshot");
        for (let k = 1; k <= 12; k += 1) {
          await writer.request(`append_items inbox.alice {"items":["a${k}"]}`);
          await new Promise((resolve) => setTimeout(resolve, 500));
        }
        await until(() => followed.mirror.version === 13, "every version");
        const got = JSON.parse(await writer.requestText("get inbox.alice"));
        assert.equal(followed.mirror.digest, got.digest);
        assert.ok(asked >= 3, `the token function was asked ${asked} times over 6 s of 3 s tokens`);
        assert.equal(TestWebSocket.instances.length, 1, "one WebSocket throughout");
        assert.ok(TestWebSocket.instances.every((socket) => !socket.url.includes("token")), "no token in a URL");
        const auths = TestWebSocket.instances[0].sent.map((text) => JSON.parse(text)).filter((line) => line.op === "auth");
        assert.equal(auths.length, asked);
        assert.deepEqual(kinds.filter((kind) => kind === "snapshot"), ["snapshot"]);
        followed.close();
        writer.close();
      },
      { http: true, args: ["--auth-keys", keyFile, "--auth-leeway-s", "0"] },
    ),
  );
});

test("a revoked subscription (its key removed) resumes with a fresh token and one changeset", async () => {
  const secrets = { k1: crypto.randomBytes(32), k2: crypto.randomBytes(32) };
  let current = "k1";
  await withKeyFile([["k1", secrets.k1]], (keyFile) =>
    withDaemon(
      async (socketPath, port, daemon) => {
        const writer = new LineClient(socketPath);
        await writer.request('apply inbox.alice {"sections":[{"id":"s","items":["a0"]}]}');
        const kinds = [];
        const statuses = [];
        TestWebSocket.instances = [];
        const followed = follow(`ws://127.0.0.1:${port}/v1/ws`, {
          transport: "websocket",
          collection: "inbox.alice",
          WebSocket: TestWebSocket,
          token: () => mint(secrets[current], current, aliceReads(600)),
          onChange: (update) => kinds.push(update.kind),
          onStatus: (text) => statuses.push(text),
        });
        await until(() => followed.mirror.version === 1, "the snapshot");
        // The key is replaced: the subscription is revoked, the function signs with the new one.
        current = "k2";
        writeKeys(keyFile, [["k2", secrets.k2]]);
        daemon.kill("SIGHUP");
        await until(() => statuses.some((text) => text.startsWith("revoked")), "the revocation");
        await writer.request('append_items inbox.alice {"items":["a1"]}');
        await until(() => followed.mirror.version === 2, "the version after the revocation");
        const got = JSON.parse(await writer.requestText("get inbox.alice"));
        assert.equal(followed.mirror.digest, got.digest);
        assert.deepEqual(kinds.filter((kind) => kind === "snapshot"), ["snapshot"]);
        followed.close();
        writer.close();
      },
      { http: true, args: ["--auth-keys", keyFile] },
    ),
  );
});

test("a static token that expires ends the follow with an error naming the revocation", async () => {
  const secret = crypto.randomBytes(32);
  await withKeyFile([["k1", secret]], (keyFile) =>
    withDaemon(
      async (socketPath, port) => {
        const writer = new LineClient(socketPath);
        await writer.request('apply inbox.alice {"sections":[{"id":"s","items":["a0"]}]}');
        const errors = [];
        const followed = follow(`ws://127.0.0.1:${port}/v1/ws`, {
          transport: "websocket",
          collection: "inbox.alice",
          WebSocket: TestWebSocket,
          token: mint(secret, "k1", aliceReads(1)),
          onError: (error) => errors.push(error),
        });
        await until(() => followed.mirror.version === 1, "the snapshot");
        await until(() => errors.length === 1, "the revocation", 5000);
        assert.equal(errors[0].code, "unauthorized");
        assert.match(errors[0].message, /revoked: unauthorized: .*expired/);
        followed.close();
        writer.close();
      },
      { http: true, args: ["--auth-keys", keyFile, "--auth-leeway-s", "0"] },
    ),
  );
});

test("a reader waits for a collection that does not exist yet", async () => {
  const secret = crypto.randomBytes(32);
  await withKeyFile([["k1", secret]], (keyFile) =>
    withDaemon(
      async (socketPath, port) => {
        const statuses = [];
        const followed = follow(`ws://127.0.0.1:${port}/v1/ws`, {
          transport: "websocket",
          collection: "inbox.alice",
          WebSocket: TestWebSocket,
          token: mint(secret, "k1", aliceReads(600)),
          onStatus: (text) => statuses.push(text),
        });
        await until(() => statuses.includes("waiting for the collection"), "the wait");
        const writer = new LineClient(socketPath);
        await writer.request('apply inbox.alice {"sections":[{"id":"s","items":["a0"]}]}');
        await until(() => followed.mirror.version === 1, "the snapshot once it exists", 5000);
        followed.close();
        writer.close();
      },
      { http: true, args: ["--auth-keys", keyFile] },
    ),
  );
});

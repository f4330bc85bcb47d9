#!/usr/bin/env python3
"""Runs a real diffcastd on a private socket and state directory, plays session.txt to it with a
subscriber listening, and writes seed inputs for the fuzz targets from what the daemon produced:
its request lines, its event lines, its write-ahead-log files and its checkpoint.

usage: make-seeds.py DIFFCASTD CORPUS_DIR
"""
import atexit, json, os, shutil, signal, socket, subprocess, sys, tempfile, time

daemon, corpus = sys.argv[1], sys.argv[2]
here = os.path.dirname(os.path.abspath(__file__))
session = [l for l in open(os.path.join(here, "session.txt"), "rb").read().split(b"\n") if l]
work = tempfile.mkdtemp(prefix="diffcast-seeds-")
atexit.register(shutil.rmtree, work, True)
daemons = []
atexit.register(lambda: [d.kill() for d in daemons if d.poll() is None])
sock, state = os.path.join(work, "d.sock"), os.path.join(work, "state")


def start():
    if os.path.exists(sock):
        os.unlink(sock)
    p = subprocess.Popen([daemon, "--socket", sock, "--state-dir", state, "--checkpoint-log-bytes", "4096",
                          "--log-level", "error"])
    daemons.append(p)
    for _ in range(200):
        try:
            connect().close()
            return p
        except OSError:
            time.sleep(0.05)
    sys.exit("the daemon did not start")


def connect():
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(sock)
    return c


buffers = {}


def lines_of(c, count, timeout=2.0):
    """Up to `count` lines from `c` (fewer when none comes for `timeout` seconds)."""
    c.settimeout(timeout)
    data = buffers.get(c, b"")
    try:
        while data.count(b"\n") < count:
            chunk = c.recv(65536)
            if not chunk:
                break
            data += chunk
    except socket.timeout:
        pass
    lines = data.split(b"\n")
    taken, rest = lines[:min(count, len(lines) - 1)], lines[min(count, len(lines) - 1):]
    buffers[c] = b"\n".join(rest)
    return taken


def response_of(c):
    """The next response on `c`, skipping events."""
    while True:
        lines = lines_of(c, 1)
        if not lines:
            sys.exit("no response")
        if lines[0].startswith(b'{"ok"'):
            return lines[0]


def stop(p, how=signal.SIGTERM):
    p.send_signal(how)
    p.wait(timeout=10)


def put(target, name, data):
    d = os.path.join(corpus, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


p = start()
subscriber = connect()
subscriber.sendall(b"subscribe feed\n")
initial = lines_of(subscriber, 2)
writer = connect()
responses = []
for line in session:
    writer.sendall(line + b"\n")
    responses.append(response_of(writer))
events = [l for l in initial + lines_of(subscriber, 100, timeout=1.0) if b'"event"' in l]
# A state with a log only (killed before any checkpoint) and one with a checkpoint and the log
# after it (killed after the log passed --checkpoint-log-bytes).
stop(p, signal.SIGKILL)
files = {n: open(os.path.join(state, n), "rb").read() for n in sorted(os.listdir(state))}
p = start()
c = connect()
c.sendall(b'{"op":"append_sections","collection":"bulk","sections":[{"id":"s","data":{"kind":"bulk"}}]}\n')
lines_of(c, 1)
for i in range(40):
    c.sendall(b'{"op":"append_items","collection":"bulk","items":[{"id":"i%d","data":{"n":%d,"pad":"%s"}}]}\n'
              % (i, i, b"x" * 8))
    response_of(c)
stop(p, signal.SIGKILL)
files2 = {n: open(os.path.join(state, n), "rb").read() for n in sorted(os.listdir(state))}


def frames(wal):
    """The payloads of a write-ahead log (LogFrame: 24-byte header, then the payload)."""
    out, offset = [], 0
    while offset + 24 <= len(wal):
        length = int.from_bytes(wal[offset + 12:offset + 16], "little")
        out.append(wal[offset + 24:offset + 24 + length])
        offset += 24 + length
    return out


# request_line / request_apply: the session's lines.
put("request_line", "session", b"\n".join(session))
for i in (1, 4, 8, 14, 20, 22):
    put("request_line", "line-%02d" % i, session[i])
put("request_apply", "session", b"\n".join(session))
put("request_apply", "session-batched", b"\n".join(session[:8]) + b"\n\n" + b"\n".join(session[8:16]) + b"\n!\n"
    + b"\n".join(session[16:]))
# event_line: what the subscriber got.
put("event_line", "events", b"\n".join(events))
for i, e in enumerate(events[:4]):
    put("event_line", "event-%02d" % i, e)
# wal_file: mode 0 (the file) and mode 1 (its payloads, framed by the harness).
wals = [(n, b) for n, b in list(files.items()) + list(files2.items()) if n.startswith("wal-") and b]
for i, (n, b) in enumerate(wals):
    put("wal_file", "framed-%d-%s" % (i, n), b"\x01" + b"\x00".join(frames(b)))
    if n == "wal-1.log":
        put("wal_file", "raw-%s" % n, b"\x00" + b)
        put("wal_file", "torn-%s" % n, b"\x00" + b[:len(b) - 7])
# checkpoint_file: mode 0 (the file) and mode 1 (its body; the harness adds the trailer), with
# the log after it as NUL-separated payloads.
checkpoint = files2["checkpoint.json"]
body = checkpoint[:checkpoint.rindex(b"\n", 0, len(checkpoint) - 1) + 1]
put("checkpoint_file", "raw", b"\x00" + checkpoint)
after = files2.get("wal-%d.log" % (json.loads(body)["wal"] + 1), b"")
put("checkpoint_file", "body-and-log", b"\x01" + body + b"".join(b"\x00" + f for f in frames(after)))
small = json.loads(body)
small["collections"] = [c for c in small["collections"] if c["name"] == "feed"]
put("checkpoint_file", "body-feed", b"\x01" + json.dumps(small, separators=(",", ":"), ensure_ascii=False).encode()
    + b"\n")
# shared_log_snapshot: each collection of the checkpoint as its owner would snapshot it
# (SharedLogSnapshot.encode: the checkpoint's members and the log sequence).
snapshots = []
for collection in json.loads(body)["collections"]:
    snapshot = {"name": collection["name"], "log": 7}
    snapshot.update({k: v for k, v in collection.items() if k not in ("name", "history")})
    snapshots.append(json.dumps(snapshot, separators=(",", ":"), ensure_ascii=False).encode())
for i, snapshot in enumerate(snapshots):
    put("shared_log_snapshot", "snapshot-%d" % i, snapshot)
put("shared_log_snapshot", "join-then-load", b"\x00".join(snapshots + snapshots[::-1]))
# shared_log_message: the log's payloads are the shared log's messages too.
payloads = [f for _, b in wals for f in frames(b)]
put("shared_log_snapshot", "join-load-follow",
    b"\x00".join([snapshots[-1], snapshots[-1]] + [b"L" + p for p in payloads[-3:]]))
put("shared_log_message", "messages", b"\x00".join(payloads[:12]))
for i, f in enumerate(payloads[:4]):
    put("shared_log_message", "message-%02d" % i, f)
put("shared_log_message", "snapshot-then-messages", b"\x00".join([b"J" + snapshots[-1], b"S" + snapshots[-1]] + payloads[-4:]))
# forward: request lines of one collection forwarded to its owner, alone and with a reply.
feed = [l for l in session[1:8]]
put("forward", "feed-writes", b"\n".join(feed))
put("forward", "feed-writes-answered", b"\n".join(feed) + b"\x00" + b'{"sequence":9}\n' + b"\n".join(responses[1:8]))
put("forward", "other-writes", b"\n".join(session[17:22]))
put("forward", "not-owner", session[1] + b'\x00{"owner":"node-2"}')
put("forward", "unavailable", session[1] + b'\x00{"unavailable":"the owner is stopping"}')
# config_file: the packaged configuration and a few variants.
config = open(os.path.join(here, "..", "..", "config", "diffcastd.yaml"), "rb").read()
put("config_file", "diffcastd.yaml", config)
put("config_file", "tcp", b"socket: /run/d.sock\ntcp: 127.0.0.1:7070\ntcp_token: secret\nlog_level: debug\n"
    b"publishers: [uid:0, 'gid:27']\nsubscribers:\n  - user:root\n")
put("config_file", "backbone", b"backbone: nats://127.0.0.1:4222, nats://127.0.0.1:4223\nbackbone_owner: false\n"
    b"backbone_lease_ms: 500\nstate_dir: /var/lib/diffcast\nsync: interval\nsync_interval_ms: 10\n")
put("config_file", "empty", b"")

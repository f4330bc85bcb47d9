#!/usr/bin/env bash
# Instructions per delivery of a fan-out, counted by callgrind: one small append at a time to
# SUBSCRIBERS subscribers of one collection, each write delivered to all of them before the
# next is sent (the `fanout` benchmark's shape). Counts, not times: the same for the same binary
# whatever else the machine is doing, so a change of the write path's cost shows up here even
# when the deliveries/s of `fanout` are lost in the machine's noise. The kernel's part (the
# writes themselves) is not counted.
#
#   scripts/instructions-fanout.sh [WRITES] [SUBSCRIBERS]   # 200 and 1,000 by default
#   DIFFCASTD=path/to/diffcastd scripts/instructions-fanout.sh   # another build, unbuilt here
#   KEEP=1 scripts/instructions-fanout.sh   # keeps callgrind's files (the folder is printed)
set -euo pipefail
cd "$(dirname "$0")/.."
writes=${1:-200}
subscribers=${2:-1000}
source scripts/callgrind.sh
callgrind_setup diffcast-fanout-instructions
# Runs the fan-out with `$1` writes under callgrind and keeps the annotation: once with the
# writes, once with none, so that the setup (connections, subscriptions, snapshots) cancels out.
measure() {
    local count=$1
    callgrind_start "$count"
    python3 - "$scratch/d.sock" "$count" "$subscribers" <<'EOF'
import selectors, socket, sys
path, writes, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def connect():
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    return s
publisher = connect()
answers = publisher.makefile("rb")
publisher.sendall(b'apply fan {"sections":[{"id":"s"}]}\n')
answers.readline()
selector = selectors.DefaultSelector()
for _ in range(count):
    s = connect()
    s.sendall(b"subscribe fan\n")
    s.setblocking(False)
    selector.register(s, selectors.EVENT_READ)
lines = 0
def drain(until):
    global lines
    while lines < until:
        for key, _ in selector.select(timeout=60):
            data = key.fileobj.recv(1 << 16)
            lines += data.count(b"\n")
# Each subscriber's snapshot and answer, then one event per write.
drain(2 * count)
text = b"x" * 80
for i in range(writes):
    publisher.sendall(b'{"op":"append_items","collection":"fan","items":[{"id":"f%d","data":{"text":"%s"}}]}\n' % (i, text))
    answers.readline()
    drain(2 * count + (i + 1) * count)
EOF
    callgrind_stop "$count"
}

measure 0
measure "$writes"
PYTHONPATH=scripts python3 - "$writes" "$subscribers" "$scratch/0.annotated" "$scratch/$writes.annotated" <<'EOF'
import sys
from callgrind_counts import counts
writes, subscribers = int(sys.argv[1]), int(sys.argv[2])
deliveries = writes * subscribers
# (row, a fragment of the mangled name of the function whose inclusive count it is)
rows = [
    ("whole daemon", "PROGRAM TOTALS"),
    ("the event loop (uv_run)", "???:uv_run "),
    ("fanning out (FanOut.publish)", "FanOutC7publish10collection4from2to5event"),
    ("writing in turns (Server.writeTurns)", "0B0C10writeTurnsyyF "),
    ("  of it, each write (Server.startWrite)", "0B0C10startWriteyyAA10ConnectionCF "),
]
setup, run = counts(sys.argv[3], rows), counts(sys.argv[4], rows)
print(f"## Instructions per delivery: {writes} appends one at a time to {subscribers:,} subscribers\n")
print("Each write delivered to every subscriber before the next; callgrind, user space only; the")
print("same daemon with the same subscribers and no writes subtracted.\n")
print("| part | instructions per delivery |")
print("|---|---:|")
for name, _ in rows:
    if name in run:
        print(f"| {name} | {(run[name] - setup.get(name, 0)) / deliveries:,.0f} |")
    else:
        print(f"| {name} | – |")
EOF

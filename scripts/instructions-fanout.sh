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
set -euo pipefail
cd "$(dirname "$0")/.."
writes=${1:-200}
subscribers=${2:-1000}
command -v valgrind >/dev/null || { echo "valgrind is missing: make bench-deps installs it" >&2; exit 1; }
binary=${DIFFCASTD:-}
if [ -z "$binary" ]; then
    swift build -c release --product diffcastd 2>&1 | grep -E "error|warning: " || true
    binary=.build/release/diffcastd
fi
scratch=$(mktemp -d "${TMPDIR:-/tmp}/diffcast-fanout-instructions.XXXXXX")
daemon=
trap '[ -z "$daemon" ] || kill $daemon 2>/dev/null || true; [ -n "${KEEP:-}" ] || rm -rf "$scratch"' EXIT
# Without debug information valgrind starts in seconds; the symbols stay.
strip -g -o "$scratch/diffcastd" "$binary"
# Runs the fan-out with `$1` writes under callgrind and keeps the annotation: once with the
# writes, once with none, so that the setup (connections, subscriptions, snapshots) cancels out.
measure() {
    local count=$1
    rm -f "$scratch/d.sock"
    valgrind --tool=callgrind --callgrind-out-file="$scratch/$count.out" "$scratch/diffcastd" \
        --socket "$scratch/d.sock" --log-level warning >/dev/null 2>&1 &
    daemon=$!
    for _ in $(seq 300); do [ -S "$scratch/d.sock" ] && break; sleep 0.1; done
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
    kill -INT $daemon
    wait $daemon || true
    daemon=
    callgrind_annotate --inclusive=yes "$scratch/$count.out" > "$scratch/$count.annotated" 2>/dev/null
}

measure 0
measure "$writes"
python3 - "$writes" "$subscribers" "$scratch/0.annotated" "$scratch/$writes.annotated" <<'EOF'
import re, sys
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
def counts(path):
    found = {}
    for line in open(path):
        match = re.match(r"\s*([\d,]+) \(", line)
        if not match:
            continue
        for name, fragment in rows:
            if fragment in line and name not in found:
                found[name] = int(match.group(1).replace(",", ""))
    return found
setup, run = counts(sys.argv[3]), counts(sys.argv[4])
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

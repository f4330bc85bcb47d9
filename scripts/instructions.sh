#!/usr/bin/env bash
# Instructions per append of a growing feed, counted by callgrind: the whole release daemon and
# its main parts. Counts, not times: unlike the feed's deliveries/s, they do not move with the
# machine's noise, so a change in the write path shows up as a changed number.
#
#   scripts/instructions.sh [APPENDS]     # 30,000 by default; about a minute
#   make bench BENCH=instructions          # the same, with valgrind installed first
#
# One publisher sends compact `append_items` lines of ~130 bytes (a window of 64 unanswered),
# ten subscribers drain every event. Each row is a function's inclusive count divided by the
# appends; the versions (how many appends one event carried) depend on timing, so the per-version
# parts (publishing) move a little from run to run.
set -euo pipefail
cd "$(dirname "$0")/.."
appends=${1:-30000}
command -v valgrind >/dev/null || { echo "valgrind is missing: make bench-deps installs it" >&2; exit 1; }
swift build -c release --product diffcastd 2>&1 | grep -E "error|warning: " || true
scratch=$(mktemp -d "${TMPDIR:-/tmp}/diffcast-instructions.XXXXXX")
trap 'kill $daemon 2>/dev/null || true; rm -rf "$scratch"' EXIT
# Without debug information valgrind starts in seconds; the symbols stay.
strip -g -o "$scratch/diffcastd" .build/release/diffcastd
valgrind --tool=callgrind --callgrind-out-file="$scratch/out" "$scratch/diffcastd" \
    --socket "$scratch/d.sock" --log-level warning >/dev/null 2>&1 &
daemon=$!
for _ in $(seq 300); do [ -S "$scratch/d.sock" ] && break; sleep 0.1; done
python3 - "$scratch/d.sock" "$appends" <<'EOF'
import socket, sys, threading
path, count = sys.argv[1], int(sys.argv[2])
def connect():
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    return s
setup = connect()
setup.sendall(b'apply feed {"sections":[{"id":"s"}]}\n')
setup.recv(1000)
def drain(s):
    while s.recv(1 << 16):
        pass
for _ in range(10):
    s = connect()
    s.sendall(b"subscribe feed\n")
    threading.Thread(target=drain, args=(s,), daemon=True).start()
publisher = connect()
answers = publisher.makefile("rb")
text = b"x" * 80
sent = acknowledged = 0
while acknowledged < count:
    if sent < count and sent - acknowledged < 64:
        end = min(count, acknowledged + 64)
        publisher.sendall(b"".join(
            b'{"op":"append_items","collection":"feed","items":[{"id":"f%d","data":{"text":"%s"}}]}\n' % (i, text)
            for i in range(sent, end)))
        sent = end
    answers.readline()
    acknowledged += 1
EOF
kill -INT $daemon
wait $daemon || true
callgrind_annotate --inclusive=yes "$scratch/out" > "$scratch/annotated" 2>/dev/null
python3 - "$appends" "$scratch/annotated" <<'EOF'
import re, sys
appends = int(sys.argv[1])
# (row, a fragment of the mangled name of the function whose inclusive count it is)
rows = [
    ("whole daemon", "PROGRAM TOTALS"),
    ("parsing (RequestParser.parse)", "RequestParserV5parse4line"),
    ("  of it, the compact append reader", "CompactAppendReaderO7request4from"),
    ("applying (ApplyEngine.write)", "ApplyB0C5write_2to"),
    ("  of it, Document.apply", "DocumentV5applyyyAA14WriteOperation"),
    ("publishing (diff, event, answers)", "ApplyB0C16publishOpenBatch2of"),
    ("  of it, the changeset", "DocumentV9changeset5since"),
    ("  of it, encoding the event", "EncodedVAA0A4Wire5EventOR"),
    ("delivering outcomes on the loop", "0B0C7deliveryy0A6Engine7OutcomeOF"),
]
counts = {}
for line in open(sys.argv[2]):
    match = re.match(r"\s*([\d,]+) \(", line)
    if not match:
        continue
    for name, fragment in rows:
        if fragment in line and name not in counts:
            counts[name] = int(match.group(1).replace(",", ""))
print(f"## Instructions per append: {appends} compact appends of ~130 bytes, 10 subscribers\n")
print("| part | instructions per append |")
print("|---|---:|")
for name, _ in rows:
    value = counts.get(name)
    print(f"| {name} | {'–' if value is None else f'{value / appends:,.0f}'} |")
EOF

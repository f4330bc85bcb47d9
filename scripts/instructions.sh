#!/usr/bin/env bash
# Instructions per append of a growing feed, counted by callgrind: the whole release daemon and
# its main parts. Counts, not times: unlike the feed's deliveries/s, they do not move with the
# machine's noise, so a change in the write path shows up as a changed number.
#
#   scripts/instructions.sh [APPENDS]     # 30,000 by default; about two minutes
#   make bench BENCH=instructions          # the same, with valgrind installed first
#
# One publisher sends `append_items` lines of ~130 bytes (a window of 64 unanswered), ten
# subscribers drain every event. It runs twice: with compact lines (`CompactAppendReader`) and,
# as the baseline, with the same lines written with one space (the general parser), each on a
# daemon of its own. Each row is a function's inclusive count divided by the appends; the
# versions (how many appends one event carried) depend on timing, so the per-version parts
# (publishing) move a little from run to run.
set -euo pipefail
cd "$(dirname "$0")/.."
appends=${1:-30000}
source scripts/callgrind.sh
callgrind_setup diffcast-instructions

# Runs the feed with lines of one shape (compact or spaced) and keeps callgrind's annotation.
measure() {
    local shape=$1
    callgrind_start "$shape"
    python3 - "$scratch/d.sock" "$appends" "$shape" <<'EOF'
import socket, sys, threading
path, count, shape = sys.argv[1], int(sys.argv[2]), sys.argv[3]
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
line = b'{"op":"append_items","collection":"feed","items":[{"id":"f%d","data":{"text":"%s"}}]}\n'
if shape == "spaced":
    line = line.replace(b'"items":', b'"items": ')
sent = acknowledged = 0
while acknowledged < count:
    if sent < count and sent - acknowledged < 64:
        end = min(count, acknowledged + 64)
        publisher.sendall(b"".join(line % (i, text) for i in range(sent, end)))
        sent = end
    answers.readline()
    acknowledged += 1
EOF
    callgrind_stop "$shape"
}

measure compact
measure spaced
PYTHONPATH=scripts python3 - "$appends" "$scratch/compact.annotated" "$scratch/spaced.annotated" <<'EOF'
import sys
from callgrind_counts import counts
appends = int(sys.argv[1])
# (row, a fragment of the mangled name of the function whose inclusive count it is)
rows = [
    ("whole daemon", "PROGRAM TOTALS"),
    ("parsing (RequestParser.parse)", "RequestParserV5parse_7reusing"),
    ("  of it, the compact append reader", "CompactAppendReaderO7request4from"),
    ("applying (ApplyEngine.write)", "ApplyB0C5write_2to"),
    ("  of it, Document.apply", "DocumentV5applyyyAA14WriteOperation"),
    ("publishing (diff, event, answers)", "ApplyB0C16publishOpenBatch2of"),
    ("  of it, the changeset", "DocumentV9changeset5since"),
    ("  of it, encoding the event", "EncodedVAA0A4Wire5EventOR"),
    ("delivering outcomes on the loop", "0B0C7deliveryy0A6Engine7OutcomeOF"),
]
compact, spaced = ({name: count / appends for name, count in counts(path, rows).items()}
                   for path in sys.argv[2:4])
print(f"## Instructions per append: {appends} appends of ~130 bytes, 10 subscribers\n")
print("Compact lines, which `CompactAppendReader` reads, against the same lines with one space,")
print("which the general parser reads; each on a daemon of its own under callgrind.\n")
print("| part | compact | with a space | compact / spaced |")
print("|---|---:|---:|---:|")
show = lambda value: "–" if value is None else f"{value:,.0f}"
for name, _ in rows:
    a, b = compact.get(name), spaced.get(name)
    ratio = f"{a / b:.2f}×" if a and b else "–"
    print(f"| {name} | {show(a)} | {show(b)} | {ratio} |")
EOF

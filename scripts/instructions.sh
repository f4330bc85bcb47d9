#!/usr/bin/env bash
# Instructions per append of a growing feed, counted by callgrind: the whole release daemon and
# its main parts. Counts, not times: unlike the feed's deliveries/s, they do not move with the
# machine's noise, so a change in the write path shows up as a changed number.
#
#   scripts/instructions.sh [APPENDS]     # 30,000 by default; about a minute and a half
#   make bench BENCH=instructions          # the same, with valgrind installed first
#
# One publisher sends `append_items` lines of ~130 bytes (a window of 64 unanswered), ten
# subscribers drain every event. It runs three times, each on a daemon of its own: with compact
# lines (`CompactAppendReader`); as the baseline, with the same lines written with one space (the
# general parser); and with compact lines again from clients that each present a capability
# token first (`auth`, HS256, minted by `diffcast token`), on a daemon that takes tokens
# (`--auth-keys`): what a token holder's appends cost besides. Each row is a function's
# inclusive count divided by the appends; the versions (how many appends one event carried)
# depend on timing, so the per-version parts (publishing) move a little from run to run.
set -euo pipefail
cd "$(dirname "$0")/.."
appends=${1:-30000}
source scripts/callgrind.sh
callgrind_setup diffcast-instructions
swift build -c release --product diffcast 2>&1 | grep -E "error|warning: " || true
key='{"kty":"oct","kid":"bench","alg":"HS256","k":"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8"}'
echo "$key" > "$scratch/key.jwk"
echo "{\"keys\":[$key]}" > "$scratch/keys.json"
token=$(.build/release/diffcast token --key "$scratch/key.jwk" --sub bench --read feed --write feed --ttl 1h)

# Runs the feed with lines of one shape (compact, spaced, or compact from token holders) and
# keeps callgrind's annotation.
measure() {
    local shape=$1
    if [ "$shape" = token ]; then
        callgrind_start "$shape" --auth-keys "$scratch/keys.json"
    else
        callgrind_start "$shape"
    fi
    python3 - "$scratch/d.sock" "$appends" "$shape" "$token" <<'EOF'
import socket, sys, threading
path, count, shape, token = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4].encode()
def connect():
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    if shape == "token":
        s.sendall(b"auth " + token + b"\n")
        answer = b""
        while not answer.endswith(b"\n"):
            answer += s.recv(1)
        if b'"ok":true' not in answer:
            sys.exit(f"auth refused: {answer!r}")
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
measure token
PYTHONPATH=scripts python3 - "$appends" "$scratch/compact.annotated" "$scratch/spaced.annotated" \
    "$scratch/token.annotated" <<'EOF'
import sys
from callgrind_counts import counts
appends = int(sys.argv[1])
# (row, a fragment of the mangled name of the function whose inclusive count it is)
rows = [
    ("whole daemon", "PROGRAM TOTALS"),
    ("parsing (RequestParser.parse)", "RequestParserV5parse_7reusing"),
    ("  of it, the compact append reader", "CompactAppendReaderO7request4from"),
    ("checking the holder's rights (Server.refuses)", "0B0C7refuses_4slot2on"),
    ("applying (ApplyEngine.write)", "ApplyB0C5write_2to"),
    ("  of it, Document.apply", "DocumentV5applyyyAA14WriteOperation"),
    ("publishing (diff, event, answers)", "ApplyB0C16publishOpenBatch2of"),
    ("  of it, the changeset", "DocumentV9changeset5since"),
    ("  of it, encoding the event", "EncodedVAA0A4Wire5EventOR"),
    ("delivering outcomes on the loop", "0B0C7deliveryy0A6Engine7OutcomeOF"),
]
compact, spaced, token = ({name: count / appends for name, count in counts(path, rows).items()}
                          for path in sys.argv[2:5])
print(f"## Instructions per append: {appends} appends of ~130 bytes, 10 subscribers\n")
print("Compact lines, which `CompactAppendReader` reads, against the same lines with one space,")
print("which the general parser reads, and against compact lines from clients that each present")
print("a capability token first; each on a daemon of its own under callgrind.\n")
print("| part | compact | with a space | with a token | compact / spaced | token − compact |")
print("|---|---:|---:|---:|---:|---:|")
show = lambda value: "–" if value is None else f"{value:,.0f}"
for name, _ in rows:
    a, b, c = compact.get(name), spaced.get(name), token.get(name)
    ratio = f"{a / b:.2f}×" if a and b else "–"
    extra = f"{c - a:+,.0f}" if a is not None and c is not None else "–"
    print(f"| {name} | {show(a)} | {show(b)} | {show(c)} | {ratio} | {extra} |")
EOF

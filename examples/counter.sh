#!/usr/bin/env bash
# Pushes a counter into the collection "demo" once a second (COUNT times, forever without it).
# Watch it with:  diffcast sub demo
#
# Needs the `diffcast` command: on PATH (`make install`), or named by DIFFCAST_COMMAND (after
# `make run` it is .build/release/diffcast). The daemon's socket comes from DIFFCAST_SOCKET.
set -euo pipefail
diffcast=${DIFFCAST_COMMAND:-diffcast}
if ! command -v "$diffcast" > /dev/null; then
    echo "counter.sh: no '$diffcast' command: run make install, or set DIFFCAST_COMMAND=.build/release/diffcast" >&2
    exit 2
fi
"$diffcast" apply demo '{"sections":[{"id":"main","items":[{"id":"counter","data":{"n":0}}]}]}' > /dev/null
for ((n = 1; n <= ${COUNT:-1000000000}; n++)); do
    "$diffcast" update_items demo --id counter --data n:="$n" at="$(date +%T)" > /dev/null
    sleep "${INTERVAL:-1}"
done

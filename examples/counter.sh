#!/usr/bin/env bash
# Pushes a counter into the collection "demo" once a second (COUNT times, forever without it).
# Watch it with:  diffcast sub demo
set -euo pipefail
diffcast apply demo - <<< '[{"id": "main", "items": [{"id": "counter", "data": {"n": 0}}]}]' > /dev/null
for ((n = 1; n <= ${COUNT:-1000000000}; n++)); do
    diffcast update_items demo --id counter --data n:="$n" at="$(date +%T)" > /dev/null
    sleep "${INTERVAL:-1}"
done

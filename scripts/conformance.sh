#!/usr/bin/env bash
# Runs ../shared/conformance/check.py against a freshly started release daemon; exits non-zero
# when any scenario fails or the daemon dies.
set -euo pipefail
cd "$(dirname "$0")/.."
checker=${CHECKER:-../shared/conformance/check.py}
workdir=$(mktemp -d)
socket="$workdir/diffcast.sock"
.build/release/diffcastd --socket "$socket" 2>"$workdir/daemon.log" &
daemon=$!
cleanup() {
  kill "$daemon" 2>/dev/null || true
  wait "$daemon" 2>/dev/null || true
  rm -rf "$workdir"
}
trap cleanup EXIT
for _ in $(seq 100); do [ -S "$socket" ] && break; sleep 0.1; done
[ -S "$socket" ] || { cat "$workdir/daemon.log"; echo "daemon did not start"; exit 1; }
status=0
python3 "$checker" --socket "$socket" --pid "$daemon" "$@" || status=$?
if ! kill -0 "$daemon" 2>/dev/null; then
  echo "the daemon died during the check:"; cat "$workdir/daemon.log"; exit 1
fi
kill -TERM "$daemon"
if ! wait "$daemon"; then echo "the daemon did not exit cleanly on SIGTERM"; status=1; fi
[ ! -e "$socket" ] || { echo "the socket file was left behind"; status=1; }
exit "$status"

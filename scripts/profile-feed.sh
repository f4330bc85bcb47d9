#!/usr/bin/env bash
# The daemon of one growing-feed run under `perf record`: where its time goes, kernel, malloc and
# cache misses included (callgrind's instruction counts see none of those). The benchmark starts
# the `diffcastd` beside itself, so a copy of it runs beside a wrapper that starts the release
# daemon under perf. Prints the functions with the most samples; the data stays for `perf report`.
# The table's server CPU column is then perf's own, not the daemon's.
#
#   scripts/profile-feed.sh                      # the feed's 200,000 appends
#   scripts/profile-feed.sh --writes 1000000     # any option of `DiffcastBenchmarks feed`
set -euo pipefail
cd "$(dirname "$0")/.."
command -v perf >/dev/null || { echo "perf is missing: apt-get install linux-perf" >&2; exit 1; }
[ -x .build/release/DiffcastBenchmarks ] && [ -x .build/release/diffcastd ] || {
    echo "build first: swift build -c release --product diffcastd; swift build -c release --product DiffcastBenchmarks" >&2
    exit 1
}
scratch=$(mktemp -d /tmp/diffcast-profile.XXXXXX)
cp .build/release/DiffcastBenchmarks "$scratch/"
cat > "$scratch/diffcastd" <<EOF
#!/bin/sh
exec perf record -F 1999 --call-graph dwarf,16384 -o "$scratch/perf.data" -- "$(pwd)/.build/release/diffcastd" "\$@" 2>/dev/null
EOF
chmod +x "$scratch/diffcastd"
"$scratch/DiffcastBenchmarks" feed --runs 1 "$@" | grep -E '^\| (server|diffcastd)'
echo
echo "Samples by function (self), from $scratch/perf.data:"
perf report -i "$scratch/perf.data" --no-children --sort symbol --stdio -g none 2>/dev/null \
    | grep -E '^ +[0-9]' | head -40 | sed -E 's/ +- +- *$//' | swift demangle --simplified

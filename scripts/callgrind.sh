# The release daemon under callgrind, for the scripts that count instructions
# (scripts/instructions.sh, scripts/instructions-fanout.sh). Sourced, not run:
#
#   callgrind_setup PREFIX   valgrind is there; the release daemon is built (or $DIFFCASTD, another
#                            build, is taken as it is) and stripped into $scratch, a new folder
#                            removed at exit unless KEEP is set
#   callgrind_start NAME [OPTION...]
#                            the daemon under callgrind on $scratch/d.sock, counting into NAME.out,
#                            with the options given
#   callgrind_stop NAME      stops it cleanly and writes callgrind_annotate's inclusive counts to
#                            $scratch/NAME.annotated (scripts/callgrind_counts.py reads them)

callgrind_setup() {
    command -v valgrind >/dev/null || { echo "valgrind is missing: make bench-deps installs it" >&2; exit 1; }
    local binary=${DIFFCASTD:-}
    if [ -z "$binary" ]; then
        swift build -c release --product diffcastd 2>&1 | grep -E "error|warning: " || true
        binary=.build/release/diffcastd
    fi
    scratch=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
    daemon=
    trap '[ -z "$daemon" ] || kill $daemon 2>/dev/null || true; [ -n "${KEEP:-}" ] || rm -rf "$scratch"' EXIT
    # Without debug information valgrind starts in seconds; the symbols stay.
    strip -g -o "$scratch/diffcastd" "$binary"
    [ -z "${KEEP:-}" ] || echo "callgrind's files stay in $scratch" >&2
}

callgrind_start() {
    local name=$1
    shift
    rm -f "$scratch/d.sock"
    valgrind --tool=callgrind --callgrind-out-file="$scratch/$name.out" "$scratch/diffcastd" \
        --socket "$scratch/d.sock" --log-level warning "$@" >/dev/null 2>&1 &
    daemon=$!
    for _ in $(seq 300); do [ -S "$scratch/d.sock" ] && break; sleep 0.1; done
}

callgrind_stop() {
    kill -INT $daemon
    wait $daemon || true
    daemon=
    callgrind_annotate --inclusive=yes "$scratch/$1.out" > "$scratch/$1.annotated" 2>/dev/null
}

#!/usr/bin/env bash
# Builds the libFuzzer executables of Fuzz/ (a package of their own around the targets' bodies in
# Fuzz/Targets: the root package's build never links libFuzzer) and runs each for a while, one
# after another, at the lowest CPU priority.
#
#   scripts/fuzz.sh [-t SECONDS] [-c release|debug] [--build-only] [--regressions-only] [TARGET...]
#
# Per target it first replays Fuzz/regressions/TARGET/* (inputs that crashed it: each passes once
# its bug is fixed; see Fuzz/regressions/README.md), then fuzzes for SECONDS from the seeds in
# Fuzz/corpus/TARGET plus the corpus grown by earlier runs (kept in .build-fuzz/corpus/TARGET),
# and prints what libFuzzer's last status line says: executions, coverage (cov: edges, ft:
# features), time, and crashes. A crash's input is kept in .build-fuzz/artifacts/TARGET/
# (reproduce: .build-fuzz/CONFIG/TARGET FILE). The exit status is 1 when any target crashed or a
# regression input fails.
#
# Environment: FUZZ_SECONDS (default 60), FUZZ_CONFIG (release: -O keeps overflow and bounds
# checks and runs ~7x faster than debug under ASan; debug also checks assert()), SWIFT (swift),
# FUZZ_FLAGS (more libFuzzer flags, e.g. "-jobs=1" or "-dict=..."), ASAN_OPTIONS (default:
# malloc_context_size=0, which keeps Swift's many small allocations cheap; set it empty to get
# allocation stacks when reproducing a memory error).
set -uo pipefail

cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-60}
config=${FUZZ_CONFIG:-release}
swift=${SWIFT:-swift}
build_only=0
regressions_only=0
targets=()
while [ $# -gt 0 ]; do
    case $1 in
        -t) seconds=$2; shift 2 ;;
        -c) config=$2; shift 2 ;;
        --build-only) build_only=1; shift ;;
        --regressions-only) regressions_only=1; shift ;;
        -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
        *) targets+=("$1"); shift ;;
    esac
done
# As FuzzTargets.all (Fuzz/Targets/FuzzTargets.swift) names them.
all=(request_line request_apply wal_file checkpoint_file shared_log_message shared_log_snapshot forward event_line
    config_file http_request websocket_frames token)
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")

# The dictionary of each target's format (the ones of numbers at their limits, op names, keys).
dictionary() {
    case $1 in
        config_file) echo Fuzz/dictionaries/config.dict ;;
        *) echo Fuzz/dictionaries/diffcast.dict ;;
    esac
}

# Inputs longer than these teach the target nothing new and slow it down.
max_len() {
    case $1 in
        request_line|event_line|config_file) echo 2048 ;;
        *) echo 0 ;; # libFuzzer's default: the largest seed
    esac
}

scratch=.build-fuzz
echo "building the fuzz targets ($config) in $scratch"
# -Xcc: the C of the dependencies (Yams' libyaml) is instrumented and checked too. Dynamic
# exclusivity checks stay on here, though a release build of the daemon skips them
# (Package.swift): an overlapping access is a bug a fuzzer should find.
nice -n 19 "$swift" build --package-path Fuzz --scratch-path "$scratch" -c "$config" \
    -Xswiftc -sanitize=fuzzer,address -Xswiftc -parse-as-library -Xswiftc -enable-testing \
    -Xswiftc -enforce-exclusivity=checked \
    -Xcc -fsanitize=fuzzer-no-link,address 2>&1 |
    grep -v "Cannot export local symbol" | grep -E "error|warning: |Compiling|Build|Linking" | tail -20
[ "${PIPESTATUS[0]}" = 0 ] || { echo "fuzz build failed" >&2; exit 2; }
[ $build_only = 1 ] && exit 0

export ASAN_OPTIONS=${ASAN_OPTIONS-malloc_context_size=0}
# A Swift trap must reach libFuzzer's handler (which saves the input), not the runtime's backtracer.
export SWIFT_BACKTRACE=enable=no
# Scratch state directories of wal_file and checkpoint_file, removed at the end.
export DIFFCAST_FUZZ_SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/diffcast-fuzz.XXXXXX")
trap 'rm -rf "$DIFFCAST_FUZZ_SCRATCH"' EXIT

status=0
report=()
for target in "${targets[@]}"; do
    binary=$scratch/$config/$target
    [ -x "$binary" ] || { echo "no target $target" >&2; exit 2; }
    regressions=(Fuzz/regressions/$target/*)
    failed=0
    if [ -e "${regressions[0]}" ]; then
        if ! nice -n 19 "$binary" "${regressions[@]}" > "$scratch/regressions-$target.log" 2>&1; then
            echo "$target: a regression input crashes again (see $scratch/regressions-$target.log)" >&2
            failed=1
            status=1
        fi
    fi
    [ $regressions_only = 1 ] && { report+=("$(printf '%-20s regressions %s' "$target" \
        "$([ $failed = 0 ] && echo pass || echo FAIL)")"); continue; }

    corpus=$scratch/corpus/$target
    artifacts=$scratch/artifacts/$target
    mkdir -p "$corpus" "$artifacts"
    log=$scratch/fuzz-$target.log
    flags=(-max_total_time="$seconds" -timeout=10 -print_final_stats=1 -artifact_prefix="$artifacts/"
        -dict="$(dictionary "$target")")
    [ "$(max_len "$target")" != 0 ] && flags+=(-max_len="$(max_len "$target")")
    before=$(ls "$artifacts" | wc -l)
    started=$(date +%s)
    # shellcheck disable=SC2086
    nice -n 19 "$binary" "${flags[@]}" ${FUZZ_FLAGS:-} "$corpus" "Fuzz/corpus/$target" > "$log" 2>&1
    code=$?
    elapsed=$(($(date +%s) - started))
    crashes=$(($(ls "$artifacts" | wc -l) - before))
    [ $code != 0 ] && [ $crashes = 0 ] && crashes="exit $code"
    last=$(grep -E '^#[0-9]+' "$log" | tail -1)
    executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    [ -n "$executions" ] || executions=$(echo "$last" | sed -n 's/^#\([0-9]*\).*/\1/p')
    cov=$(echo "$last" | sed -n 's/.*cov: \([0-9]*\).*/\1/p')
    ft=$(echo "$last" | sed -n 's/.*ft: \([0-9]*\).*/\1/p')
    rate=$((${executions:-0} / (elapsed > 0 ? elapsed : 1)))
    line=$(printf '%-20s executions %10s  cov %6s  ft %7s  %5ss  %7s/s  crashes %s' "$target" "${executions:-?}" \
        "${cov:-?}" "${ft:-?}" "$elapsed" "$rate" "$crashes")
    [ $failed = 1 ] && line="$line  (regression FAILS)"
    echo "$line"
    report+=("$line")
    if [ "$crashes" != 0 ]; then
        status=1
        grep -E "fuzz oracle|Fatal error|ERROR: (AddressSanitizer|libFuzzer)|SUMMARY" "$log" | head -3 | sed 's/^/    /'
        ls -t "$artifacts" | head -3 | sed "s|^|    $artifacts/|"
    fi
done
echo
printf '%s\n' "${report[@]}"
exit $status

#!/bin/sh
# The triage CI gate in plain POSIX shell, for any CI: (start the server under test), bench it with
# --repeat 3, fetch the last baseline report, compare, write the Markdown summary, keep the new report.
# docs/CI.md walks through it; deploy/ci/github-actions.yml runs it on GitHub Actions.
#
#   deploy/ci/gate.sh --url URL --baseline PATH [options]
#
#   --url URL            the server under test (OpenAI-compatible), e.g. http://127.0.0.1:8000
#   --server-cmd CMD     start the server under test with CMD first (in the background; stopped at exit)
#                        and wait up to --wait-s seconds for URL/v1/models to answer
#   --wait-s S           default 300
#   --baseline PATH      the last baseline report (a triage bench JSON). Missing: this run becomes the first
#                        baseline; the gate passes and says so
#   --baseline-cmd CMD   fetch the baseline first: CMD runs with $BASELINE set to PATH (e.g.
#                        'git show origin/triage-baseline:bench.json > "$BASELINE"'); a failure means no baseline
#   --out DIR            where the new report, the compare report and the summary go (default triage-gate)
#   --summary FILE       append the Markdown summary here (default $GITHUB_STEP_SUMMARY when set)
#   --bench-args ARGS    the workload, word-split (default "--concurrency 1,4 --num-requests 32")
#   --max-regression S   passed to triage compare (METRIC=PCT,...)
#   --inconclusive P     pass (default) or fail
#
# Environment: TRIAGE is the triage command (default "triage"; e.g. ".venv/bin/python -m triage").
# Exit codes: those of triage compare (0 pass, 1 regression, 2 unusable input); 2 for a bad option, a server
# that never answered, or a bench that failed.
set -u

TRIAGE=${TRIAGE:-triage}
URL=""
SERVER_CMD=""
WAIT_S=300
BASELINE=""
BASELINE_CMD=""
OUT=triage-gate
SUMMARY=${GITHUB_STEP_SUMMARY:-}
BENCH_ARGS="--concurrency 1,4 --num-requests 32"
MAX_REGRESSION=""
INCONCLUSIVE=pass
SERVER_PID=""

die() { echo "gate.sh: $*" >&2; exit 2; }

while [ $# -gt 0 ]; do
    case "$1" in
        --url|--server-cmd|--wait-s|--baseline|--baseline-cmd|--out|--summary|--bench-args|--max-regression|--inconclusive)
            [ $# -ge 2 ] || die "$1 needs a value"
            case "$1" in
                --url) URL=$2 ;;
                --server-cmd) SERVER_CMD=$2 ;;
                --wait-s) WAIT_S=$2 ;;
                --baseline) BASELINE=$2 ;;
                --baseline-cmd) BASELINE_CMD=$2 ;;
                --out) OUT=$2 ;;
                --summary) SUMMARY=$2 ;;
                --bench-args) BENCH_ARGS=$2 ;;
                --max-regression) MAX_REGRESSION=$2 ;;
                --inconclusive) INCONCLUSIVE=$2 ;;
            esac
            shift 2 ;;
        -h|--help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown option $1 (see --help)" ;;
    esac
done
[ -n "$URL" ] || die "--url is required (the server under test)"
[ -n "$BASELINE" ] || die "--baseline is required (where the last baseline report is, or will be)"
case "$WAIT_S" in ''|*[!0-9]*) die "--wait-s $WAIT_S is not a whole number of seconds" ;; esac
case "$INCONCLUSIVE" in pass|fail) ;; *) die "--inconclusive $INCONCLUSIVE is not pass or fail" ;; esac
mkdir -p "$OUT" || die "cannot create $OUT"

stop_server() {
    if [ -n "$SERVER_PID" ]; then
        kill "$SERVER_PID" 2>/dev/null
        wait "$SERVER_PID" 2>/dev/null
        SERVER_PID=""
    fi
}
trap stop_server EXIT
trap 'stop_server; exit 130' INT TERM

summary() {     # append stdin to the summary file, when there is one
    if [ -n "$SUMMARY" ]; then cat >> "$SUMMARY"; else cat > /dev/null; fi
}

# 1. The server under test.
if [ -n "$SERVER_CMD" ]; then
    sh -c "exec $SERVER_CMD" > "$OUT/server.log" 2>&1 &
    SERVER_PID=$!
    waited=0
    until curl -sf -o /dev/null "$URL/v1/models"; do
        kill -0 "$SERVER_PID" 2>/dev/null || { tail -n 20 "$OUT/server.log" >&2; die "the server exited"; }
        [ "$waited" -lt "$WAIT_S" ] || die "$URL/v1/models did not answer within $WAIT_S s"
        sleep 1
        waited=$((waited + 1))
    done
fi

# 2. Bench it, three repeats in rounds (compare's interval and drift check come from them).
# shellcheck disable=SC2086  # TRIAGE and BENCH_ARGS are word lists on purpose
$TRIAGE bench --url "$URL" --repeat 3 $BENCH_ARGS --json "$OUT/bench.json" --format json > /dev/null \
    || die "triage bench failed (exit $?)"
stop_server

# 3. The last baseline.
if [ -n "$BASELINE_CMD" ]; then
    BASELINE="$BASELINE" sh -c "$BASELINE_CMD" || rm -f "$BASELINE"
fi
if [ ! -s "$BASELINE" ]; then
    printf '## triage gate: no baseline yet\n\nNo report at `%s`: this run (`%s`) is the first baseline.\n' \
        "$BASELINE" "$OUT/bench.json" | summary
    echo "gate.sh: no baseline at $BASELINE; $OUT/bench.json is the first one"
    exit 0
fi

# 4. Compare. compare appends to $GITHUB_STEP_SUMMARY itself when set; the gate writes the summary once.
set -- "$BASELINE" "$OUT/bench.json" --inconclusive "$INCONCLUSIVE" --json "$OUT/compare.json"
[ -z "$MAX_REGRESSION" ] || set -- "$@" --max-regression "$MAX_REGRESSION"
# shellcheck disable=SC2086
env -u GITHUB_STEP_SUMMARY $TRIAGE compare "$@" --format markdown > "$OUT/summary.md"
rc=$?
summary < "$OUT/summary.md"
case $rc in
    0) echo "gate.sh: pass ($OUT/summary.md)" ;;
    1) echo "gate.sh: regression ($OUT/summary.md)" ;;
    *) echo "gate.sh: the reports could not be compared (exit $rc)" >&2 ;;
esac
exit $rc

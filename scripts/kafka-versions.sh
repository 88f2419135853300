#!/usr/bin/env bash
# The Kafka version matrix: runs the real-broker suites against each Apache Kafka version of a
# list (from Maven Central, through scripts/kafka/start.sh), one broker set at a time, and
# prints a table: version, mode, tests passed (and how many of them skipped loudly, naming
# why) and failed, the phases that failed, and the failover and hand-over medians of
# `failover_bench --mode kill`.
#
# Usage: scripts/kafka-versions.sh [--quick] [VERSION[:zookeeper] ...]
#
#   VERSION            a Kafka release, 3.0.0 or newer; KRaft mode unless :zookeeper (3.x only;
#                      3.0 to 3.4 run only in ZooKeeper mode)
#   (no VERSION)       the full list: 3.0.2:zookeeper 3.5.2 3.9.2 3.9.2:zookeeper 4.0.2 4.1.0 4.4.0
#   --quick            per version, one broker only: the transport, leadership, CLI and
#                      interop suites and a short failover_bench (the CI run, a few minutes a
#                      version). Without it, per version: one broker (transport, leadership,
#                      security, ACLs, CLI, interop, the transport's unit tests that need a
#                      broker, the singleton consumer, failover_bench), three brokers (the
#                      three-broker fault test), and a short chaos run (one broker, 4 failovers)
#
# Output: target/kafka-versions/<UTC time>/ holds each phase's log and table.md (also printed;
# target/kafka-versions/latest is a link to it). Exits non-zero if any version failed.
# Environment: KAFKA_VERSIONS_FAILOVERS (failover_bench rounds, default 4)
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 1
# The Kafka client's features (its test binary brings the drivers it needs itself).
KAFKA_FEATURES="tracing,serde"
# scripts/chaos.sh's build, so that its binary (and failover_bench beside it) is built once.
CHAOS_FEATURES="kafka-coordination/tokio,kafka-coordination/smol,kafka-coordination/async-std,kafka-coordination/kafka,kafka-coordination-examples/kafka"
FULL_LIST="3.0.2:zookeeper 3.5.2 3.9.2 3.9.2:zookeeper 4.0.2 4.1.0 4.4.0"
ROUNDS="${KAFKA_VERSIONS_FAILOVERS:-4}"

die() {
    echo "kafka-versions: error: $*" >&2
    exit 2
}

# ---- inside a one-broker cluster (with-broker.sh runs this script again) --------------------
if [ "${1:-}" = "--inside" ]; then
    quick="$2"
    out="$3"
    status=0
    run() { # run NAME CMD...: the phase's output goes to its log
        local name="$1"
        shift
        if "$@" >"$out/$name.log" 2>&1; then
            echo "phase $name: passed" >>"$out/phases"
        else
            echo "phase $name: FAILED" >>"$out/phases"
            status=1
        fi
    }
    if [ "$quick" = 1 ]; then
        run client cargo test -p kafka-coordination-kafka --features "$KAFKA_FEATURES" \
            --no-fail-fast --test brokers -- transport:: leadership:: old_broker:: unreachable::
        run cli cargo test -p kafka-coordination-cli --no-fail-fast
    else
        run client cargo test -p kafka-coordination-kafka --features "$KAFKA_FEATURES" \
            --no-fail-fast --test brokers
        run cli cargo test -p kafka-coordination-cli --no-fail-fast
        run unit cargo test -p kafka-coordination-kafka --features "$KAFKA_FEATURES" --lib
        run singleton cargo test -p kafka-coordination-examples --features kafka --test singleton_consumer
    fi
    run bench target/debug/examples/failover_bench --mode kill --failovers "$ROUNDS" \
        --bootstrap "$KAFKA_BOOTSTRAP"
    exit "$status"
fi

QUICK=0
LIST=()
while [ $# -gt 0 ]; do
    case "$1" in
    --quick) QUICK=1 ;;
    -h | --help)
        sed -n '2,/^set /p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    -*) die "unknown option '$1' (try --help)" ;;
    *) LIST+=("$1") ;;
    esac
    shift
done
# shellcheck disable=SC2206
[ ${#LIST[@]} -gt 0 ] || LIST=($FULL_LIST)
for entry in "${LIST[@]}"; do
    [[ "$entry" =~ ^[0-9]+\.[0-9]+\.[0-9]+(:zookeeper)?$ ]] ||
        die "'$entry' is not VERSION or VERSION:zookeeper (for example 3.9.2:zookeeper)"
done

STAMP="$(date -u +%Y%m%dT%H%M%SZ)"
OUT="$ROOT/target/kafka-versions/$STAMP"
mkdir -p "$OUT"
ln -sfn "$STAMP" "$ROOT/target/kafka-versions/latest"
say() { echo "kafka-versions: $*" >&2; }

# Build everything first, so that no cluster waits for a compile.
say "building the suites, failover_bench, the chaos binary and the Java member"
build() {
    if [ "$QUICK" = 1 ]; then
        cargo test -p kafka-coordination-kafka --features "$KAFKA_FEATURES" --no-run --test brokers
    else
        cargo test -p kafka-coordination-kafka --features "$KAFKA_FEATURES" --no-run --lib \
            --test brokers &&
            cargo test -p kafka-coordination-examples --features kafka --no-run --test singleton_consumer
    fi &&
        cargo test -p kafka-coordination-cli --no-run &&
        cargo build --workspace --features "$CHAOS_FEATURES" --example failover_bench --example chaos &&
        scripts/interop.sh
}
build >"$OUT/build.log" 2>&1 || {
    tail -30 "$OUT/build.log" >&2
    die "the build failed (log: $OUT/build.log)"
}

# passed/failed counts of every libtest summary in the logs given
count() {
    local field="$1"
    shift
    cat "$@" 2>/dev/null | sed -n "s/^test result: .* \([0-9]*\) passed; \([0-9]*\) failed.*/\1 \2/p" |
        awk -v f="$field" '{ s += (f == "passed" ? $1 : $2) } END { print s + 0 }'
}
median() { # median LABEL LOG: the median of failover_bench's summary line LABEL
    sed -n "s/^$1 *median *\([0-9.]*\) ms.*/\1/p" "$2" 2>/dev/null | head -1
}

ROWS=()
any_failed=0
for entry in "${LIST[@]}"; do
    version="${entry%%:*}"
    mode=kraft
    [ "$entry" != "$version" ] && mode=zookeeper
    dir="$OUT/$version-$mode"
    mkdir -p "$dir"
    : >"$dir/phases"
    started=$SECONDS
    say "Kafka $version ($mode): one broker"
    zk=0
    [ "$mode" = zookeeper ] && zk=1
    export KAFKA_VERSION="$version" KAFKA_ZOOKEEPER="$zk"
    if ! scripts/kafka/with-broker.sh "$ROOT/scripts/kafka-versions.sh" --inside "$QUICK" "$dir" \
        >"$dir/one-broker.log" 2>&1; then
        grep -q . "$dir/phases" || echo "phase broker: FAILED (did not start; see one-broker.log)" >>"$dir/phases"
    fi
    if [ "$QUICK" = 0 ]; then
        say "Kafka $version ($mode): three brokers"
        if scripts/kafka/with-broker.sh --brokers 3 cargo test -p kafka-coordination-kafka \
            --features "$KAFKA_FEATURES" --test brokers three_broker >"$dir/three-brokers.log" 2>&1; then
            echo "phase three-brokers: passed" >>"$dir/phases"
        else
            echo "phase three-brokers: FAILED" >>"$dir/phases"
        fi
        say "Kafka $version ($mode): chaos (4 failovers, seed 1)"
        if scripts/chaos.sh --debug --failovers 4 --seed 1 --max-seconds 400 >"$dir/chaos.log" 2>&1; then
            echo "phase chaos: passed" >>"$dir/phases"
        else
            echo "phase chaos: FAILED" >>"$dir/phases"
        fi
    fi
    unset KAFKA_VERSION KAFKA_ZOOKEEPER
    passed="$(count passed "$dir"/*.log)"
    failed="$(count failed "$dir"/*.log)"
    # Tests that returned early with a SKIPPED banner count as passed; the column says how many
    # (on 3.x the transaction-version-2 tests; on one broker the three-broker test).
    skipped="$(cat "$dir"/*.log 2>/dev/null | grep -c '^\*\*\* SKIPPED' || true)"
    bad="$(sed -n 's/^phase \(.*\): FAILED.*/\1/p' "$dir/phases" | paste -sd, -)"
    failover="$(median 'failover overhead (ms)' "$dir/bench.log")"
    handover="$(median 'hand-over after resign (ms)' "$dir/bench.log")"
    result=pass
    if [ -n "$bad" ] || [ "$failed" != 0 ] || [ "$passed" = 0 ]; then
        result=FAIL
        any_failed=1
    fi
    ROWS+=("| $version | $mode | $passed | $skipped | $failed | ${bad:--} | ${failover:-?} | ${handover:-?} | $((SECONDS - started)) s | $result |")
    say "Kafka $version ($mode): $result ($passed passed, $failed failed${bad:+, failed phases: $bad})"
    if [ "$result" = FAIL ]; then
        # A CI log keeps only this script's output: name what failed and why, from the logs.
        for log in "$dir"/*.log; do
            { grep -E '^test .* FAILED$' "$log"; grep -E -A8 '^---- .* stdout ----$' "$log"; } 2>/dev/null |
                head -60 | sed "s|^|  $(basename "$log"): |" >&2
        done
    fi
done

{
    echo "Kafka version matrix ($([ "$QUICK" = 1 ] && echo quick || echo full)), $STAMP; logs in target/kafka-versions/$STAMP/"
    echo
    echo "| version | mode | tests passed | of which skipped | tests failed | phases failed | failover overhead median (ms) | hand-over median (ms) | took | result |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
    printf '%s\n' "${ROWS[@]}"
} | tee "$OUT/table.md"
exit "$any_failed"

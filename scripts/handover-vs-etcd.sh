#!/usr/bin/env bash
# Hand-over and failover on Kafka, per driver, next to etcd's election as the anchor, in one
# run: builds bench/etcd (etcd-election-bench, Go) and failover_bench (release), starts a Kafka
# test broker (scripts/kafka/with-broker.sh), runs failover_bench once per driver, then
# etcd-election-bench (a single-node etcd embedded in a process of its own), each with the same
# rounds: members are processes, the leader is SIGKILLed on even rounds and resigns on odd
# ones, 3 s lease (etcd: session TTL 3 s). Then prints a table, one row per flavour:
#   hand-over after resign        the instant the successor's `elected` returned, its first
#                                 lease committed (etcd: its Campaign returned), minus the
#                                 instant the leader's resign began
#   failover overhead (SIGKILL)   the same instant minus the dead leader's lease deadline
#                                 (etcd: its last keepalive response plus the TTL)
# A long benchmark (about a minute per driver for 20 rounds), not part of CI.
#
# Usage: scripts/handover-vs-etcd.sh [--failovers N] [--drivers "blocking tokio ..."] [--warmup N]
#                                    [--bootstrap HOST:PORT]
#
#   --failovers N   rounds per flavour, kills and resigns alternating (default 20)
#   --drivers LIST  failover_bench's drivers (default "blocking tokio smol async-std host")
#   --warmup N      rounds run first and left out of the table, so that the broker's JVM
#                   has compiled its transaction paths (default 20; 0: none)
#   --bootstrap H:P a broker that is already running (say one the test suite warmed up)
#                   instead of a fresh one; a fresh broker's first minutes of hand-overs are
#                   slower, even after the warm-up
#
# Environment: FAILOVER_BENCH  a failover_bench binary to run instead of building one.
# Every run's full output stays in target/handover-vs-etcd/<time>/.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

die() {
    echo "handover-vs-etcd: $*" >&2
    exit 2
}

# Inside the broker's lifetime (with-broker.sh runs this script again): the runs themselves.
if [ "${1:-}" = "--inside" ]; then
    out="$2" failovers="$3" drivers="$4" warmup="$5"
    touch "$out/broker-started"
    # A broker just started runs its transaction paths interpreted until the JVM has compiled
    # them: the first minute's hand-overs are twice as slow. Warm it up, and keep none of it.
    if [ "$warmup" -gt 0 ]; then
        echo "== warm-up: failover_bench --failovers $warmup (not in the table)" >&2
        "$FAILOVER_BENCH_BIN" --bootstrap "$KAFKA_BOOTSTRAP" --failovers "$warmup" \
            >"$out/warmup.txt"
    fi
    for d in $drivers; do
        echo "== failover_bench --driver $d" >&2
        "$FAILOVER_BENCH_BIN" --bootstrap "$KAFKA_BOOTSTRAP" --failovers "$failovers" \
            --driver "$d" | tee "$out/kafka-$d.txt"
    done
    echo "== etcd-election-bench" >&2
    "$ETCD_BENCH_BIN" bench --failovers "$failovers" --ttl 3 | tee "$out/etcd.txt"
    exit 0
fi

failovers=20
warmup=20
bootstrap=""
drivers="blocking tokio smol async-std host"
while [ $# -gt 0 ]; do
    case "$1" in
    --failovers | --drivers | --warmup | --bootstrap)
        [ $# -ge 2 ] || die "$1 needs a value"
        case "$1" in
        --failovers) failovers="$2" ;;
        --drivers) drivers="$2" ;;
        --warmup) warmup="$2" ;;
        --bootstrap) bootstrap="$2" ;;
        esac
        shift 2
        ;;
    -h | --help)
        awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"
        exit 0
        ;;
    *) die "unknown argument '$1' (try --help)" ;;
    esac
done
case "$failovers" in '' | *[!0-9]*) die "--failovers must be a number, not '$failovers'" ;; esac
case "$warmup" in '' | *[!0-9]*) die "--warmup must be a number, not '$warmup'" ;; esac
[ "$failovers" -gt 0 ] || die "--failovers must be positive"
[ -n "$drivers" ] || die "--drivers must name at least one driver"

command -v go >/dev/null || die "go not found; bench/etcd needs Go (see its go.mod)"
target="$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"
out="$target/handover-vs-etcd/$(date +%Y%m%d-%H%M%S)"
mkdir -p "$out"

echo "handover-vs-etcd: building bench/etcd" >&2
(cd bench/etcd && go build -o "$target/etcd-bench/etcd-election-bench" .)
export ETCD_BENCH_BIN="$target/etcd-bench/etcd-election-bench"
if [ -n "${FAILOVER_BENCH:-}" ]; then
    [ -x "$FAILOVER_BENCH" ] || die "FAILOVER_BENCH=$FAILOVER_BENCH is not an executable"
    export FAILOVER_BENCH_BIN="$FAILOVER_BENCH"
else
    echo "handover-vs-etcd: building failover_bench (release)" >&2
    cargo build --release -p kafka-coordination-examples --features kafka --example failover_bench
    export FAILOVER_BENCH_BIN="$target/release/examples/failover_bench"
fi

loadavg="$(cat /proc/loadavg)"
if [ -n "$bootstrap" ]; then
    KAFKA_BOOTSTRAP="$bootstrap" "$root/scripts/handover-vs-etcd.sh" --inside "$out" "$failovers" \
        "$drivers" "$warmup" || die "a run failed; its output is in $out"
fi
# A broker that did not start (say, a port taken in between) is tried once more.
for attempt in 1 2; do
    [ -z "$bootstrap" ] || break
    status=0
    scripts/kafka/with-broker.sh "$root/scripts/handover-vs-etcd.sh" --inside "$out" "$failovers" "$drivers" "$warmup" || status=$?
    [ "$status" -eq 0 ] && break
    if [ -e "$out/broker-started" ] || [ "$attempt" -eq 2 ]; then
        die "a run failed (exit $status); its output is in $out"
    fi
    echo "handover-vs-etcd: the Kafka broker did not start; trying once more" >&2
done

# "median X ms   p90 Y ms" of a summary line, rounded: "X / Y".
figures() {
    grep -m1 "^$2" "$1" | awk '{ for (i = 1; i < NF; i++) {
        if ($i == "median") m = $(i + 1); if ($i == "p90") p = $(i + 1) }
        printf "%.0f / %.0f ms", m, p }'
}
row() {
    printf '| %-32s | %-22s | %-30s |\n' "$1" "$(figures "$2" 'hand-over after resign (ms)')" \
        "$(figures "$2" 'failover overhead (ms)')"
}
etcd_version="$(sed -n 's|^[[:space:]]*go.etcd.io/etcd/server/v3 \(v[^ ]*\).*|\1|p' bench/etcd/go.mod)"
echo
echo "$failovers rounds per flavour (kills and resigns alternate); load average before: $loadavg"
echo
printf '| %-32s | %-22s | %-30s |\n' "flavour" "hand-over median / p90" "failover overhead median / p90"
printf '|%s|%s|%s|\n' "$(printf -- '-%.0s' {1..34})" "$(printf -- '-%.0s' {1..24})" "$(printf -- '-%.0s' {1..32})"
for d in $drivers; do
    row "kafka-coordination, $d" "$out/kafka-$d.txt"
done
row "etcd $etcd_version election" "$out/etcd.txt"
echo
echo "handover-vs-etcd: full output in $out"

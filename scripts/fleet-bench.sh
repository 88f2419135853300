#!/usr/bin/env bash
# The fleet balancing benchmark on a three-broker Kafka test cluster of its own: builds the
# `fleet_bench` and `fleet_member` examples and the CLI (release), starts three brokers
# (scripts/kafka/with-broker.sh --brokers 3, in a run dir of its own), creates the state topic
# and the fleet topic with the CLI, runs fleet_bench (settle, kill, restart, scale, upgrade),
# adds the brokers' CPU over the run, and stops the brokers.
#
# Usage: scripts/fleet-bench.sh [--roles N | --quick] [--members N] [--scenarios LIST]
#                               [--partitions N] [--fleet-partitions N]
#                               [-- MORE fleet_bench ARGUMENTS]
#
#   --roles N             roles every member leads (default 3000)
#   --quick               300 roles: a smoke run
#   --members N           members at the start (default 3)
#   --scenarios LIST      settle,kill,restart,scale,upgrade or all (default all)
#   --partitions N        the state topic's partitions (default 16)
#   --fleet-partitions N  the fleet topic's partitions (default 1)
#   after --               e.g. --lease-ms 6000 --renew-ms 2000 --max-in-motion 100
#
# Environment: FLEET_MEMBER=PATH runs that member binary instead of building the
# fleet_member example; FLEET_MEMBER_FEATURES (default kafka-client) are the examples'
# features it is built with; CARGO_TARGET_DIR as usual.
#
# The output (fleet_bench's, then the brokers' CPU) goes to the terminal and to
# .kafka/fleet-bench/fleet-bench-<time>.txt; the members' own output and the figures
# (figures.csv, stats::CSV_HEADER) to .kafka/fleet-bench/<time>/. Exits with fleet_bench's
# status: non-zero on a safety failure or a run that could not complete, not on a missed
# timing target.
#
# Requests per role: fleet_bench reports them when the members' STATS lines carry
# requests=<n> (the member's KafkaTransport::requests_sent()); nothing is read from the
# brokers for it.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

die() {
    echo "fleet-bench.sh: $*" >&2
    exit 2
}

target="${CARGO_TARGET_DIR:-$root/target}"
state_topic=fleet-bench-state
fleet_topic=fleet-bench-fleet

# ---- inside the cluster (this script again, under with-broker.sh) ---------------------------
if [ "${1:-}" = --inner ]; then
    : "${KAFKA_BOOTSTRAP:?}" "${KAFKA_RUN_DIR:?}" "${FB_OUT:?}" "${FB_DIR:?}"
    cli="$target/release/kafka-coordination"
    for t in "$state_topic:$FB_PARTITIONS" "$fleet_topic:$FB_FLEET_PARTITIONS"; do
        "$cli" --bootstrap-servers "$KAFKA_BOOTSTRAP" --topic "${t%%:*}" --partitions "${t#*:}" \
            topic create | tee -a "$FB_OUT"
    done
    hz="$(getconf CLK_TCK)"
    # The brokers' CPU so far, in clock ticks: utime + stime of every node's JVM.
    broker_ticks() {
        local sum=0 pidfile pid ticks
        for pidfile in "$KAFKA_RUN_DIR"/node-*.pid; do
            pid="$(cat "$pidfile" 2>/dev/null || true)"
            [ -n "$pid" ] && [ -r "/proc/$pid/stat" ] || continue
            # The fields after the command name: utime and stime are the 12th and 13th.
            ticks="$(sed 's/^.*) //' "/proc/$pid/stat" | awk '{ print $12 + $13 }')"
            sum=$((sum + ticks))
        done
        echo "$sum"
    }
    cpu0="$(broker_ticks)"
    t0="$(date +%s%N)"
    status=0
    "$target/release/examples/fleet_bench" --member-bin "$FLEET_MEMBER" \
        --bootstrap "$KAFKA_BOOTSTRAP" --state-topic "$state_topic" --partitions "$FB_PARTITIONS" --fleet-topic "$fleet_topic" \
        --roles "$FB_ROLES" --members "$FB_MEMBERS" --scenarios "$FB_SCENARIOS" \
        --dir "$FB_DIR" --csv "$FB_DIR/figures.csv" --cli "$cli" "${@:2}" 2>&1 | tee -a "$FB_OUT" ||
        status="${PIPESTATUS[0]}"
    cpu1="$(broker_ticks)"
    t1="$(date +%s%N)"
    awk -v ticks="$((cpu1 - cpu0))" -v hz="$hz" -v ns="$((t1 - t0))" -v roles="$FB_ROLES" 'BEGIN {
        cpu = ticks / hz; secs = ns / 1e9;
        printf "broker CPU (3 brokers, utime+stime of their JVMs): %.1f s over %.0f s of run = %.2f cores; %.3f ms of broker CPU per role per second\n",
            cpu, secs, cpu / secs, cpu * 1000 / secs / roles
    }' | tee -a "$FB_OUT"
    exit "$status"
fi

# ---- arguments ------------------------------------------------------------------------------
roles=""
quick=0
members=3
scenarios=all
partitions=16
fleet_partitions=1
extra=()
while [ $# -gt 0 ]; do
    case "$1" in
    --roles | --members | --partitions | --fleet-partitions)
        [ $# -ge 2 ] || die "$1 needs a value"
        case "$2" in '' | 0 | *[!0-9]*) die "$1 needs a positive integer, got '$2'" ;; esac
        case "$1" in
        --roles) roles="$2" ;;
        --members) members="$2" ;;
        --partitions) partitions="$2" ;;
        --fleet-partitions) fleet_partitions="$2" ;;
        esac
        shift 2
        ;;
    --scenarios)
        [ $# -ge 2 ] || die "$1 needs a value"
        scenarios="$2"
        shift 2
        ;;
    --quick)
        quick=1
        shift
        ;;
    --)
        shift
        extra=("$@")
        break
        ;;
    -h | --help)
        sed -n '2,33p' "$0" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    *) die "unknown argument '$1' (see --help)" ;;
    esac
done
if [ -z "$roles" ]; then
    if [ "$quick" = 1 ]; then roles=300; else roles=3000; fi
elif [ "$quick" = 1 ]; then
    die "--quick is 300 roles: give --roles or --quick, not both"
fi

# ---- build ------------------------------------------------------------------------------------
echo "fleet-bench.sh: building the CLI and the examples (release)" >&2
cargo build --release -p kafka-coordination-cli --bin kafka-coordination
if [ -n "${FLEET_MEMBER:-}" ]; then
    [ -x "$FLEET_MEMBER" ] || die "FLEET_MEMBER=$FLEET_MEMBER is not an executable file"
    cargo build --release -p kafka-coordination-examples --example fleet_bench
elif [ -e examples/examples/fleet_member.rs ] || [ -d examples/examples/fleet_member ]; then
    cargo build --release -p kafka-coordination-examples \
        --features "${FLEET_MEMBER_FEATURES:-kafka-client}" --example fleet_bench --example fleet_member
    FLEET_MEMBER="$target/release/examples/fleet_member"
else
    die "there is no fleet_member example (examples/examples/fleet_member.rs) to build; set FLEET_MEMBER=PATH to run another member binary"
fi
[ -x "$target/release/examples/fleet_bench" ] || die "the build did not produce $target/release/examples/fleet_bench"
[ -x "$target/release/kafka-coordination" ] || die "the build did not produce $target/release/kafka-coordination"

# ---- run ----------------------------------------------------------------------------------------
stamp="$(date +%Y%m%d-%H%M%S)"
out_root="$root/.kafka/fleet-bench"
mkdir -p "$out_root/$stamp"
export FB_OUT="$out_root/fleet-bench-$stamp.txt"
export FB_DIR="$out_root/$stamp"
export FB_ROLES="$roles" FB_MEMBERS="$members" FB_SCENARIOS="$scenarios"
export FB_PARTITIONS="$partitions" FB_FLEET_PARTITIONS="$fleet_partitions"
export FLEET_MEMBER CARGO_TARGET_DIR="$target"
export KAFKA_RUN_DIR="${KAFKA_RUN_DIR:-$root/.kafka/run-fleet-bench-$$}"
{
    echo "fleet-bench.sh: $(date -u +%Y-%m-%dT%H:%M:%SZ) $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo '+changes'); $roles roles, $members members, scenarios $scenarios; state topic $state_topic ($partitions partitions), fleet topic $fleet_topic ($fleet_partitions); member $FLEET_MEMBER"
    echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$FB_OUT"
status=0
scripts/kafka/with-broker.sh --brokers 3 "$0" --inner "${extra[@]+"${extra[@]}"}" || status=$?
echo "fleet-bench.sh: output in $FB_OUT, the members' output in $FB_DIR (exit $status)" >&2
exit "$status"

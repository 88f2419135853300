#!/usr/bin/env bash
# The capacity model against a run: on a three-broker Kafka test cluster of its own
# (replication 3, min.insync.replicas 2), measures the brokers' idle CPU, runs `many_roles`
# twice (N1 roles, then N2 roles, each a steady state of leaders renewing), takes the cost of a
# renewal from the first run, predicts the second run's broker CPU and requests from it, checks
# the prediction, and prints the roles per cluster size that cost allows
# (kafka_coordination_examples::capacity; docs/guide/performance.md, "Capacity").
#
# Usage: scripts/capacity.sh [--roles N1,N2] [--seconds S] [--lease-ms L] [--renew-ms R]
#                            [--tolerance T] [--idle-seconds S]
#
#   --roles N1,N2     the calibration run's roles and the checked run's (default 100,200)
#   --seconds S       each run's steady state (default 60)
#   --lease-ms L      (default 30000) and --renew-ms R (default 10000): both runs
#   --tolerance T     the largest relative error of a prediction that holds (default 0.25)
#   --idle-seconds S  how long the idle brokers are measured (default 20)
#
# Output: the terminal and .kafka/capacity/<time>/ (each run's log, capacity.txt). Exits 0 when
# the prediction holds, 1 when it does not, 2 when a run could not be made.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

die() {
    echo "capacity.sh: $*" >&2
    exit 2
}

target="${CARGO_TARGET_DIR:-$root/target}"

# ---- inside the cluster (with-broker.sh runs this script again) -------------------------------
if [ "${1:-}" = "--inner" ]; then
    shift
    out="$1" n1="$2" n2="$3" secs="$4" lease="$5" renew="$6" tolerance="$7" idle_secs="$8"
    pids="$(cat "$KAFKA_RUN_DIR"/node-*.pid | paste -sd, -)"
    [ -n "$pids" ] || die "no broker pid in $KAFKA_RUN_DIR"
    ticks() { # CPU ticks (user + system) of every broker, summed
        local sum=0 p f
        for p in ${pids//,/ }; do
            f="$(sed 's/.*) //' "/proc/$p/stat")"
            set -- $f
            sum=$((sum + ${12} + ${13}))
        done
        echo "$sum"
    }
    hz="$(getconf CLK_TCK)"
    # The topic first (replication 3), so that the idle measure sees the cluster as the runs do.
    "$target/release/examples/many_roles" --roles 1 --seconds 1 --replication 3 \
        --lease-ms "$lease" --renew-ms "$renew" --broker-pid "$pids" >"$out/warm-up.log" 2>&1 ||
        die "the warm-up run failed (see $out/warm-up.log)"
    sleep 5 # let the warm-up's resigns settle before the idle window
    t0="$(ticks)"
    sleep "$idle_secs"
    t1="$(ticks)"
    idle="$(awk -v a="$t0" -v b="$t1" -v hz="$hz" -v s="$idle_secs" 'BEGIN { printf "%.4f", (b - a) / hz / s }')"
    echo "capacity.sh: brokers idle: $idle cores (pids $pids, $idle_secs s)"
    for n in "$n1" "$n2"; do
        echo "capacity.sh: many_roles, $n roles, lease $lease ms, renew $renew ms, $secs s steady"
        "$target/release/examples/many_roles" --roles "$n" --seconds "$secs" --replication 3 \
            --lease-ms "$lease" --renew-ms "$renew" --broker-pid "$pids" >"$out/roles-$n.log" 2>&1 ||
            die "many_roles with $n roles failed (see $out/roles-$n.log)"
        grep -E "^(renewals|many_roles|CAPACITY)" "$out/roles-$n.log" || true
    done
    status=0
    "$target/release/examples/capacity" --idle-cores "$idle" --tolerance "$tolerance" \
        "$out/roles-$n1.log" "$out/roles-$n2.log" | tee "$out/capacity.txt" || status=$?
    exit "$status"
fi

roles="100,200" secs=60 lease=30000 renew=10000 tolerance=0.25 idle_secs=20
while [ $# -gt 0 ]; do
    case "$1" in
    --roles) roles="${2:?--roles N1,N2}"; shift ;;
    --seconds) secs="${2:?--seconds S}"; shift ;;
    --lease-ms) lease="${2:?--lease-ms L}"; shift ;;
    --renew-ms) renew="${2:?--renew-ms R}"; shift ;;
    --tolerance) tolerance="${2:?--tolerance T}"; shift ;;
    --idle-seconds) idle_secs="${2:?--idle-seconds S}"; shift ;;
    -h | --help)
        sed -n '2,/^set /p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    *) die "unknown argument '$1' (try --help)" ;;
    esac
    shift
done
n1="${roles%%,*}" n2="${roles#*,}"
for v in "$n1" "$n2" "$secs" "$lease" "$renew" "$idle_secs"; do
    [[ "$v" =~ ^[1-9][0-9]*$ ]] || die "'$v' is not a whole number above 0 (--roles takes N1,N2)"
done
[ "$n1" != "$n2" ] || die "--roles: the two runs need different sizes to check a prediction"

echo "capacity.sh: building many_roles and capacity (release)" >&2
cargo build --release -p kafka-coordination-examples --features kafka \
    --example many_roles --example capacity
stamp="$(date +%Y%m%d-%H%M%S)"
out="$root/.kafka/capacity/$stamp"
mkdir -p "$out"
echo "capacity.sh: $(date -u +%Y-%m-%dT%H:%M:%SZ) $(git rev-parse --short HEAD 2>/dev/null || echo '?'); machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)" |
    tee "$out/machine.txt"
export KAFKA_RUN_DIR="${KAFKA_RUN_DIR:-$root/.kafka/run-capacity-$$}"
status=0
scripts/kafka/with-broker.sh --brokers 3 "$0" --inner "$out" "$n1" "$n2" "$secs" "$lease" "$renew" \
    "$tolerance" "$idle_secs" || status=$?
echo "capacity.sh: output in $out (exit $status)" >&2
exit "$status"

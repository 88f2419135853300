#!/usr/bin/env bash
# The performance page's plots: renders docs/guide/data/*.csv (the benchmarks' --csv output)
# as SVG files in docs/guide/img/ with scripts/plots.py (Python 3's standard library only).
#
#   scripts/plots.sh               render the plots from the committed data
#   scripts/plots.sh --run         first run the in-memory benchmarks again (host_bench: one
#                                  host with N roles, N from 100 to 20,000, two runs each, 20 s
#                                  of steady state; then a burst of 2,000 failovers), about 6 min
#   scripts/plots.sh --run-kafka   first run the real-broker benchmarks, on a single-node broker of
#                                  their own (scripts/kafka/with-broker.sh): failover_bench (20
#                                  rounds, SIGKILLs and resigns alternating), many_roles
#                                  --handover 20, and many_roles with N roles for 30 s of steady
#                                  state (N = 1,000, 3,000, 10,000), about 8 min after the build
#
# Both options may be given. A run replaces the data files it writes and notes the machine it
# ran on in docs/guide/data/conditions-*.txt.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export CARGO_TERM_COLOR=never
data=docs/guide/data
run=0
kafka=0
for arg in "$@"; do
    case "$arg" in
        --run) run=1 ;;
        --run-kafka) kafka=1 ;;
        *) echo "usage: scripts/plots.sh [--run] [--run-kafka]" >&2; exit 2 ;;
    esac
done

# note_conditions FILE WHAT: the machine a run is on.
note_conditions() {
    {
        echo "$2"
        echo "  date: $(date -u +%Y-%m-%dT%H:%MZ)"
        echo "  cores: $(nproc), $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)"
        echo "  load average before the run: $(cut -d' ' -f1-3 /proc/loadavg)"
        echo "  $(rustc --version | cut -d' ' -f1-2)"
    } >"$data/$1"
}

mkdir -p "$data"
if [ "$run" = 1 ]; then
    cargo build --release -p kafka-coordination-examples --example host_bench
    rm -f "$data/host_bench.csv"
    note_conditions conditions-host_bench.txt "host_bench (in-memory broker, release build)"
    for rep in 1 2; do
        for n in 100 1000 3000 10000 20000; do
            target/release/examples/host_bench --roles "$n" --seconds 20 --drivers host \
                --csv "$data/host_bench.csv"
        done
    done
    target/release/examples/host_bench --roles 4000 --burst --drivers "" --csv "$data/host_bench.csv"
fi

if [ "$kafka" = 1 ]; then
    cargo build --release -p kafka-coordination-examples --features kafka \
        --example failover_bench --example many_roles
    rm -f "$data/failover_bench.csv" "$data/many_roles_handover.csv" "$data/many_roles.csv"
    note_conditions conditions-kafka.txt "failover_bench and many_roles (Kafka $(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' scripts/kafka/pom.xml), one broker on this host, release build)"
    # The broker's script exports KAFKA_BOOTSTRAP, which both benchmarks read.
    scripts/kafka/with-broker.sh bash -c "
        target/release/examples/failover_bench --failovers 20 --csv '$data/failover_bench.csv' &&
        target/release/examples/many_roles --handover 20 --lease-ms 10000 --renew-ms 3000 \
            --csv '$data/many_roles_handover.csv' &&
        for n in 1000 3000 10000; do
            target/release/examples/many_roles --roles \$n --seconds 30 --csv '$data/many_roles.csv' || exit
        done"
fi

python3 scripts/plots.py --data "$data" --out docs/guide/img

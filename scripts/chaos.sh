#!/usr/bin/env bash
# The chaos suite on a Kafka test cluster of its own: builds the `chaos` example, starts one or
# three brokers (scripts/kafka/with-broker.sh, in a run dir of its own), runs member processes
# while seeded faults hit their leaders, standbys and (with three brokers) the brokers, checks
# the data topic read_committed, prints the figures and stops the brokers.
#
# Usage: scripts/chaos.sh [--failovers N] [--seed S] [--brokers 1|3] [--debug]
#                         [--max-seconds S] [--broker-kills N] [--self-test] [--postgres]
#                         [--clock-faults N] [--supervisor] [--partitions]
#                         [-- MORE `chaos run` ARGUMENTS]
#
#   --failovers N    stop after N failovers (default 200)
#   --seed S         the fault sequence's seed (default: from the clock; printed)
#   --brokers 1|3    one broker, or three (adds broker kills; default 1)
#   --debug          use the debug build (scripts/test.sh has built it) instead of --release
#   --max-seconds S  fail unless the N failovers complete within S seconds (default: no bound)
#   --broker-kills N with --brokers 3: every other fault kills brokers (the state partition's
#                    leader, the coordinator, both, the data partition's leader, in turn) until N
#                    kills; fails if a term ends in one with no fault aimed at its member
#   --self-test      after a passing check, forge a stale write and a lost acknowledgement,
#                    and fail unless the checker then fails
#   --postgres       members also write each job as a row to PostgreSQL through the database
#                    fence; the checker reads the table: no row of a deposed term after its
#                    successor's first write, every acknowledged row present, refused stale
#                    writes counted. Uses KC_POSTGRES_URL when set (scripts/postgres/
#                    with-postgres.sh), else starts a throwaway cluster of its own.
#   --supervisor     the supervisor scenario instead (scripts/chaos-supervisor.py): CLI `run`
#                    supervisors of one role whose start-script workers ignore SIGTERM, leaders'
#                    terms ended by SIGTERM and crashes; fails on any unit of work of a term
#                    after its successor's election. --failovers counts its faults.
#   --clock-faults N every other fault moves a member's wall clock (libfaketime preloaded into
#                    the members) until N of them: a leader's clock ahead then the leader killed,
#                    a standby's behind, a leader's jumping ahead and back by more than a lease;
#                    the run ends with each one's outcome (term kept or lost, time to a leader)
#   --partitions     network faults instead (scripts/chaos-net.sh): three brokers and every
#                    member in network namespaces, nftables cuts between named nodes healed
#                    after a seeded hold; --failovers counts its faults (default there: 30),
#                    --clock-faults N adds N clock faults between them. Needs root; without
#                    root it prints SKIP and exits 0.
#   after --          e.g. --members 5 --roles 3 --lease-ms 3000 --stagger-ms 500
#
# Exits non-zero on any safety violation, or when fewer than N failovers completed. The
# journals stay in .kafka/chaos/<seed>-<time>/ (or CHAOS_DIR); check them again with
#   <target>/release/examples/chaos check --bootstrap HOST:PORT --dir DIR   (broker still up)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

die() {
    echo "chaos.sh: $*" >&2
    exit 2
}

failovers=200
seed=""
brokers=1
profile=release
max_seconds=""
broker_kills=0
clock_faults=0
supervisor=0
postgres=0
partitions=0
failovers_given=0
extra=()
extra_flags=()
while [ $# -gt 0 ]; do
    case "$1" in
    --failovers | --seed | --brokers | --max-seconds | --broker-kills | --clock-faults)
        [ $# -ge 2 ] || die "$1 needs a value"
        case "$2" in '' | *[!0-9]*) die "$1 needs a non-negative integer, got '$2'" ;; esac
        case "$1" in
        --failovers)
            failovers="$2"
            failovers_given=1
            ;;
        --seed) seed="$2" ;;
        --brokers) brokers="$2" ;;
        --max-seconds) max_seconds="$2" ;;
        --broker-kills) broker_kills="$2" ;;
        --clock-faults) clock_faults="$2" ;;
        esac
        shift 2
        ;;
    --debug)
        profile=debug
        shift
        ;;
    --self-test)
        extra_flags+=(--self-test)
        shift
        ;;
    --supervisor)
        supervisor=1
        shift
        ;;
    --postgres)
        postgres=1
        shift
        ;;
    --partitions)
        partitions=1
        shift
        ;;
    --)
        shift
        extra=("$@")
        break
        ;;
    -h | --help)
        sed -n '2,42p' "$0" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    *) die "unknown argument '$1' (try --help)" ;;
    esac
done
case "$brokers" in 1 | 3) ;; *) die "--brokers is 1 or 3, got '$brokers'" ;; esac
[ "$failovers" -gt 0 ] || die "--failovers must be positive"
[ "$supervisor" = 0 ] || [ "$clock_faults" -eq 0 ] || die "--clock-faults is for the member suite, not --supervisor"
[ -n "$seed" ] || seed=$(($(date +%s) % 1000000))
if [ "$partitions" = 1 ]; then
    [ "$failovers_given" = 1 ] || failovers=30
    exec scripts/chaos-net.sh --faults "$failovers" --seed "$seed" \
        $([ "$profile" = debug ] && echo --debug) -- \
        ${max_seconds:+--max-seconds "$max_seconds"} \
        $([ "$clock_faults" -gt 0 ] && echo --clock-faults "$clock_faults") "${extra_flags[@]+"${extra_flags[@]}"}" \
        "${extra[@]+"${extra[@]}"}"
fi
if [ "$postgres" = 1 ] && [ "$supervisor" = 0 ] && [ -z "${KC_POSTGRES_URL:-}" ]; then
    # A PostgreSQL cluster of its own, around the whole run (this script again, inside it).
    exec scripts/postgres/with-postgres.sh "$0" --failovers "$failovers" --seed "$seed" \
        --brokers "$brokers" $([ "$profile" = debug ] && echo --debug) \
        ${max_seconds:+--max-seconds "$max_seconds"} --broker-kills "$broker_kills" \
        --clock-faults "$clock_faults" \
        "${extra_flags[@]+"${extra_flags[@]}"}" --postgres -- "${extra[@]+"${extra[@]}"}"
fi

if [ "$supervisor" = 1 ]; then
    target="${CARGO_TARGET_DIR:-$root/target}"
    cargo build $([ "$profile" = release ] && echo --release) -p kafka-coordination-cli \
        --bin kafka-coordination
    dir="${CHAOS_DIR:-$root/.kafka/chaos-supervisor/$seed-$(date +%Y%m%d-%H%M%S)}"
    export KAFKA_RUN_DIR="${KAFKA_RUN_DIR:-$root/.kafka/run-chaos-$$}"
    args=(--bin "$target/$profile/kafka-coordination" --faults "$failovers" --seed "$seed" --dir "$dir")
    [ -z "$max_seconds" ] || args+=(--max-seconds "$max_seconds")
    exec scripts/kafka/with-broker.sh --brokers "$brokers" python3 scripts/chaos-supervisor.py \
        "${args[@]}" "${extra[@]+"${extra[@]}"}"
fi

# The same features as scripts/test.sh, so that its debug build is reused as it is.
features="kafka-coordination/tokio,kafka-coordination/smol,kafka-coordination/async-std,kafka-coordination/kafka,kafka-coordination/postgres,kafka-coordination-examples/kafka,kafka-coordination-examples/postgres"
target="${CARGO_TARGET_DIR:-$root/target}"
if [ "$profile" = release ]; then
    cargo build --release --workspace --features "$features" --example chaos
else
    cargo build --workspace --features "$features" --example chaos
fi
bin="$target/$profile/examples/chaos"
[ -x "$bin" ] || die "the build did not produce $bin"

dir="${CHAOS_DIR:-$root/.kafka/chaos/$seed-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$(dirname "$dir")"
export KAFKA_RUN_DIR="${KAFKA_RUN_DIR:-$root/.kafka/run-chaos-$$}"
echo "chaos.sh: seed $seed, $brokers broker(s), $failovers failovers; journals in $dir" >&2

args=(run --brokers "$brokers" --failovers "$failovers" --seed "$seed" --dir "$dir"
    --kafka-scripts "$root/scripts/kafka")
[ -z "$max_seconds" ] || args+=(--max-seconds "$max_seconds")
[ "$broker_kills" -eq 0 ] || args+=(--broker-kills "$broker_kills")
[ "$clock_faults" -eq 0 ] || args+=(--clock-faults "$clock_faults")
args+=("${extra_flags[@]+"${extra_flags[@]}"}")
if [ "$postgres" = 1 ]; then
    args+=(--postgres "$KC_POSTGRES_URL")
fi
exec scripts/kafka/with-broker.sh --brokers "$brokers" "$bin" "${args[@]}" "${extra[@]+"${extra[@]}"}"

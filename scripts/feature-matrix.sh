#!/usr/bin/env bash
# The feature matrix: the library and its tests build and pass with each driver feature alone,
# with and without `memory`, with `kafka` (the real-broker suites skip loudly unless
# KAFKA_BOOTSTRAP is set, e.g. when run under scripts/kafka/with-broker.sh), and `postgres`
# alone and with `tokio` (its suite skips loudly unless KC_POSTGRES_URL is set); the Kafka client
# crate alone (its tests with none and with all of its features, its library with each); then the
# command-line tool's crate (kafka-coordination-cli), which takes `kafka`, `blocking` and `serde`.
#
#   scripts/feature-matrix.sh            every combination: build and run the tests
#   scripts/feature-matrix.sh --check    every combination: build the tests only (faster)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export CARGO_TERM_COLOR=never
mode=test
[ "${1:-}" = "--check" ] && mode=check

combos=()
for driver in blocking tokio smol async-std; do
    combos+=("$driver" "$driver,memory" "$driver,kafka")
done
combos+=("memory" "kafka" "memory,tracing" "blocking,memory,metrics" "tokio,memory,metrics" "blocking,memory,serde" "postgres" "tokio,postgres")

# The 10,000-seed simulation runs the in-memory broker and the core, the same under every driver
# feature, for minutes in a debug build: it runs in this combination only (scripts/stress-tests.sh
# and scripts/test.sh run it too).
simulation_in="blocking,memory"

passed=0
failed=()
for features in "${combos[@]}"; do
    printf '\n==== feature matrix: --no-default-features --features %s\n' "$features"
    if [ "$mode" = check ]; then
        cmd=(cargo test -p kafka-coordination --no-default-features --features "$features" --no-run)
    elif [ "$features" = "$simulation_in" ]; then
        cmd=(cargo test -p kafka-coordination --no-default-features --features "$features")
    else
        cmd=(cargo test -p kafka-coordination --no-default-features --features "$features"
            -- --skip simulation::simulate_10k_seeds)
    fi
    if "${cmd[@]}"; then
        passed=$((passed + 1))
    else
        failed+=("$features")
    fi
done
# The Kafka client alone (kafka-coordination-kafka): its tests with none and with all of its
# features, and its library with each feature alone.
kafka_combos=("" "tracing,serde,fuzzing" "tracing" "serde" "fuzzing")
for features in "${kafka_combos[@]}"; do
    printf '\n==== feature matrix: -p kafka-coordination-kafka --no-default-features --features "%s"\n' "$features"
    case "$features" in
        "" | *,*) cmd=(cargo test -p kafka-coordination-kafka --no-default-features --features "$features") ;;
        *) cmd=(cargo build -p kafka-coordination-kafka --lib --no-default-features --features "$features") ;;
    esac
    [ "$mode" = check ] && [ "${cmd[1]}" = test ] && cmd+=(--no-run)
    if "${cmd[@]}"; then
        passed=$((passed + 1))
    else
        failed+=("kafka-coordination-kafka:$features")
    fi
done

printf '\n==== feature matrix: the kafka-coordination-cli crate\n'
cli=(cargo test -p kafka-coordination-cli)
[ "$mode" = check ] && cli+=(--no-run)
if cargo build -p kafka-coordination-cli && "${cli[@]}"; then
    passed=$((passed + 1))
else
    failed+=("kafka-coordination-cli")
fi

total=$((${#combos[@]} + ${#kafka_combos[@]} + 1))
echo
echo "feature matrix: ${passed} of ${total} combinations passed"
if [ "${#failed[@]}" -gt 0 ]; then
    echo "feature matrix: FAILED: ${failed[*]}" >&2
    exit 1
fi

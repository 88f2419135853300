#!/usr/bin/env bash
# The feature matrix: the library and its tests build and pass with each driver feature alone,
# with and without `memory`, with `kafka` (the real-broker suites skip loudly unless
# KAFKA_BOOTSTRAP is set, e.g. when run under scripts/kafka/with-broker.sh), and `postgres`
# alone and with `tokio` (its suite skips loudly unless KC_POSTGRES_URL is set); the Kafka client
# crate alone, with none and each of its features.
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
combos+=("memory" "kafka" "memory,tracing" "blocking,memory,metrics" "tokio,memory,metrics" "blocking,memory,serde" "cli" "postgres" "tokio,postgres")

passed=0
failed=()
for features in "${combos[@]}"; do
    printf '\n==== feature matrix: --no-default-features --features %s\n' "$features"
    if [ "$mode" = check ]; then
        cmd=(cargo test -p kafka-coordination --no-default-features --features "$features" --no-run)
    else
        cmd=(cargo test -p kafka-coordination --no-default-features --features "$features")
    fi
    if "${cmd[@]}"; then
        passed=$((passed + 1))
    else
        failed+=("$features")
    fi
done
# The Kafka client alone (kafka-coordination-kafka): no feature, and each of its own.
kafka_combos=("" "tracing" "serde" "fuzzing" "tracing,serde")
for features in "${kafka_combos[@]}"; do
    printf '\n==== feature matrix: -p kafka-coordination-kafka --no-default-features --features "%s"\n' "$features"
    cmd=(cargo test -p kafka-coordination-kafka --no-default-features --features "$features")
    [ "$mode" = check ] && cmd+=(--no-run)
    if "${cmd[@]}"; then
        passed=$((passed + 1))
    else
        failed+=("kafka-coordination-kafka:$features")
    fi
done

total=$((${#combos[@]} + ${#kafka_combos[@]}))
echo
echo "feature matrix: ${passed} of ${total} combinations passed"
if [ "${#failed[@]}" -gt 0 ]; then
    echo "feature matrix: FAILED: ${failed[*]}" >&2
    exit 1
fi

#!/usr/bin/env bash
# The tests against real Apache Kafka (KRaft), each phase on a fresh throwaway cluster:
#   1. one broker:    the Kafka client's test binary (kafka/tests/brokers/: the transport, the
#                     library end to end, security and ACLs), the client's unit tests that need a
#                     broker, and the command-line tool (cli/tests/cli/);
#   2. three brokers: the leader of the role's partition crashes (brokers three_broker).
# Runs from anywhere (it changes to the repository root). Needs Java 17+ and, the first time, Maven
# (scripts/kafka/start.sh fetches the Kafka jars into .kafka/). Both phases run; exits non-zero if
# any failed. Extra arguments go to every `cargo test` (e.g. --release).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 1
# The Kafka client's features (its test binary brings the drivers it needs itself).
KAFKA_FEATURES="tracing,serde"

# Phase 1's body, run by with-broker.sh inside the broker's lifetime.
if [ "${1:-}" = "--single-broker-suite" ]; then
    shift
    cargo test -p kafka-coordination-kafka --features "$KAFKA_FEATURES" "$@" --test brokers || exit 1
    # The tool's tests except the Java member's (`interop::`, which scripts/test.sh runs after
    # scripts/interop.sh has built the member).
    cargo test -p kafka-coordination-cli "$@" -- --skip interop:: || exit 1
    exec cargo test -p kafka-coordination-kafka --features "$KAFKA_FEATURES" "$@" --lib
fi

failed=()
phase() {
    local name="$1"
    shift
    local started=$SECONDS
    echo "==== kafka-tests: $name" >&2
    if "$@"; then
        echo "==== kafka-tests: $name: passed in $((SECONDS - started)) s" >&2
    else
        echo "==== kafka-tests: $name: FAILED after $((SECONDS - started)) s" >&2
        failed+=("$name")
    fi
}

# Build first, so that no cluster waits for a compile.
phase "build" cargo test -p kafka-coordination-kafka --features "$KAFKA_FEATURES" "$@" --no-run \
    --lib --test brokers &&
    cargo test -p kafka-coordination-cli "$@" --no-run
if [ ${#failed[@]} -gt 0 ]; then
    echo "==== kafka-tests: FAILED: the tests do not build" >&2
    exit 1
fi
phase "single broker" scripts/kafka/with-broker.sh "$ROOT/scripts/kafka-tests.sh" --single-broker-suite "$@"
phase "three brokers" scripts/kafka/with-broker.sh --brokers 3 \
    cargo test -p kafka-coordination-kafka --features "$KAFKA_FEATURES" "$@" --test brokers three_broker

if [ ${#failed[@]} -gt 0 ]; then
    echo "==== kafka-tests: FAILED: ${failed[*]}" >&2
    exit 1
fi
echo "==== kafka-tests: all passed" >&2

#!/usr/bin/env bash
# The one test command: from a fresh clone, installs what is missing, checks the golden vectors
# (and their partitions against Kafka's own murmur2), builds everything, runs a short fuzz run
# (scripts/fuzz.sh), starts a real Apache Kafka broker (KRaft, from Maven Central), runs every
# test, runs the three-broker fault test, and stops the brokers, also when a test fails.
#
#   scripts/test.sh            everything
#   SKIP_KAFKA=1 scripts/test.sh   everything but the real-broker suites (they then skip loudly)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export CARGO_TERM_COLOR=never
features="kafka-coordination/tokio,kafka-coordination/smol,kafka-coordination/async-std,kafka-coordination/kafka,kafka-coordination/metrics,kafka-coordination/cli,kafka-coordination-examples/kafka"
adapter_features="tokio,smol,async-std,kafka"

step() { printf '\n==== [%4ds] %s\n' "$SECONDS" "$*"; }

step "dependencies"
scripts/ensure-deps.sh

step "golden vectors: generator agrees with the files, Kafka's murmur2 agrees with the partitions"
python3 golden/generate.py --check
scripts/golden-java-check.sh

step "build (all targets, all features) and the no_std core"
cargo build --workspace --all-targets --features "$features"
cargo build -p kafka-coordination-core --no-default-features

step "fuzz: 200,000 inputs of every decoder and parser of broker bytes (debug build)"
scripts/fuzz.sh --dev --inputs 200000

if [ "${SKIP_KAFKA:-0}" = 1 ]; then
    step "tests (real-broker suites skip: SKIP_KAFKA=1)"
    cargo test --workspace --features "$features"
    exit 0
fi

step "tests, with a single-node Kafka broker"
scripts/kafka/with-broker.sh cargo test --workspace --features "$features"

if [ -f adapters/tests/kafka_leadership.rs ]; then
    step "three-broker fault test"
    scripts/kafka/with-broker.sh --brokers 3 \
        cargo test -p kafka-coordination --features "$adapter_features" --test kafka_leadership three_broker
fi
step "all tests passed"

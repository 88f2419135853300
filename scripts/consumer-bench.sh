#!/usr/bin/env bash
# The singleton consumer's exactly-once run, longer than the test's: builds the
# `singleton_consumer` example (debug), starts a test broker of its own
# (scripts/kafka/with-broker.sh) unless KAFKA_BOOTSTRAP is set, feeds N input records over two
# partitions, runs member processes, SIGKILLs and SIGSTOPs the consuming leader while standbys
# take over, checks the output with an independent read_committed consumer and prints N, the
# failovers, duplicates (must be 0) and gaps (must be 0).
#
# Usage: scripts/consumer-bench.sh [--records N] [--members M] [--kills K] [--stops S]
#                                  [--batch B] [--pause-ms P]
# Defaults: 20000 records, 3 members, 6 kills, 4 stops, 20 records a transaction, 40 ms pause.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

# What is given first wins (the example reads the first occurrence of a flag).
args=("$@" --records 20000 --members 3 --kills 6 --stops 4)
cargo build -q -p kafka-coordination-examples --features kafka --example singleton_consumer
exe="$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')/debug/examples/singleton_consumer"
if [ -n "${KAFKA_BOOTSTRAP:-}" ]; then
    exec "$exe" bench "${args[@]}"
fi
exec scripts/kafka/with-broker.sh "$exe" bench "${args[@]}"

#!/usr/bin/env bash
# The one test command: from a fresh clone, installs what is missing, checks the golden vectors
# (and their partitions against Kafka's own murmur2), builds the Java member of the spec
# (scripts/interop.sh: interop/java, whose own codec asserts the vectors too), checks the
# README and the guide (scripts/docs-check.py; their code blocks compile as doc tests), builds
# everything, runs a short fuzz run (scripts/fuzz.sh), model-checks the core's Candidate
# (model/), starts a real Apache Kafka broker (KRaft, from Maven Central) and a throwaway
# PostgreSQL cluster (scripts/postgres/, for the database fence), runs every test, runs the
# README's first run (scripts/first-run.sh), the three-broker fault test and short seeded runs
# of the chaos suite (scripts/chaos.sh: crashes, the supervisor, broker kills, and as root
# network and clock faults in namespaces), then the quick version matrix on the oldest and the
# newest supported Kafka (scripts/kafka-versions.sh), and stops the brokers and the database,
# also when a test fails.
#
#   scripts/test.sh            everything
#   SKIP_KAFKA=1 scripts/test.sh   everything but the real-broker suites (they then skip loudly)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export CARGO_TERM_COLOR=never
features="kafka-coordination/tokio,kafka-coordination/smol,kafka-coordination/async-std,kafka-coordination/kafka,kafka-coordination/metrics,kafka-coordination/postgres,kafka-coordination-examples/kafka,kafka-coordination-examples/postgres,kafka-coordination-kafka/tracing,kafka-coordination-kafka/serde,kafka-coordination-transport/serde"
# The Kafka client's features (its test binary, kafka/tests/brokers/, brings the drivers itself).
kafka_features="tracing,serde"

step() { printf '\n==== [%4ds] %s\n' "$SECONDS" "$*"; }

step "dependencies"
scripts/ensure-deps.sh

# promtool, for the ops kit's test (ops/alerts.yml checked, ops/alerts_test.yml run): built once
# into .tools/bin. In CI (CI set) a missing promtool fails the run; elsewhere the test skips.
step "promtool (the alert rules' checks and unit tests)"
if promtool="$(scripts/ensure-promtool.sh)"; then
    export PROMTOOL="$promtool"
elif [ -n "${CI:-}" ] && [ "$CI" != 0 ] && [ "$CI" != false ]; then
    echo "test.sh: promtool is missing and CI=$CI requires it" >&2
    exit 1
else
    echo "*** promtool is missing: the ops kit's rule tests will skip ***" >&2
fi

step "docs: the README and the guide (length, no history, tagged code blocks, links)"
python3 scripts/docs-check.py --self-test && python3 scripts/docs-check.py
python3 scripts/import-loops.py kafka-coordination/src transport/src kafka/src cli/src core/src model/src examples/src \
    --layers kafka/src=kafka/layers.txt

step "golden vectors: generator agrees with the files, Kafka's murmur2 agrees with the partitions"
python3 golden/generate.py --check
scripts/golden-java-check.sh

# Before the tests: cli/tests/cli/interop.rs runs this member against the library and fails,
# when a broker is there, if its classpath file is missing.
step "the Java member of the spec (interop/java): build, classpath file, golden vectors in Java"
scripts/interop.sh

step "build (all targets, all features) and the no_std core"
cargo build --workspace --all-targets --features "$features"
cargo build -p kafka-coordination-core --no-default-features

step "model check: the real Candidate, exhaustively, for 2 and 3 members (release build)"
cargo test -p kafka-coordination-model --release

step "fuzz: 200,000 inputs of every decoder and parser of broker bytes (debug build)"
scripts/fuzz.sh --dev --inputs 200000

if [ "${SKIP_KAFKA:-0}" = 1 ]; then
    step "tests, with a PostgreSQL cluster (real-broker suites skip: SKIP_KAFKA=1)"
    scripts/postgres/with-postgres.sh \
        cargo test --workspace --exclude kafka-coordination-model --features "$features"
    exit 0
fi

step "tests, with a single-node Kafka broker and a PostgreSQL cluster"
scripts/kafka/with-broker.sh scripts/postgres/with-postgres.sh \
    cargo test --workspace --exclude kafka-coordination-model --features "$features"

# The README's first run, line by line, on a broker of its own: three members of the README's
# programs (two at a time), the leader SIGKILLed, a standby taking over and resigning on SIGTERM.
step "the README's first run (scripts/first-run.sh)"
scripts/first-run.sh

# A short seeded chaos run (member processes, leaders killed, stopped and resigned) on a broker
# and a PostgreSQL cluster of its own, the members writing to both (to PostgreSQL through the
# database fence); it fails on any safety violation in the topic or the table, when 10
# failovers do not complete within 10 minutes, or when the checker does not catch the forged
# writes of its self-test.
step "chaos suite: 10 failovers on one broker, writes to Kafka and PostgreSQL (seed 1)"
scripts/chaos.sh --debug --failovers 10 --seed 1 --max-seconds 600 --self-test --postgres

# The CLI's `run` supervisor under seeded ends of terms, with start-script workers that ignore
# SIGTERM: fails on any unit of work of a term after its successor's election.
step "chaos suite: the supervisor scenario, 12 faults (seed 3)"
scripts/chaos.sh --supervisor --debug --failovers 12 --seed 3 --max-seconds 300

if [ -f kafka/tests/brokers/leadership.rs ]; then
    step "three-broker fault test"
    scripts/kafka/with-broker.sh --brokers 3 \
        cargo test -p kafka-coordination-kafka --features "$kafka_features" --test brokers three_broker
fi

step "chaos suite: 4 failovers on three brokers, with broker kills (seed 2)"
scripts/chaos.sh --debug --brokers 3 --failovers 4 --seed 2 --max-seconds 900

# Partial faults: three brokers and every member in network namespaces of their own, paths
# between named nodes cut with nftables (and slowed or stalled through a proxy), members' wall
# clocks moved with libfaketime. Needs root (CI runs as root); without it, it says SKIP loudly.
step "chaos suite: 8 network faults and 2 clock faults on three brokers in namespaces (seed 5)"
scripts/chaos.sh --partitions --debug --failovers 8 --clock-faults 2 --seed 5 --max-seconds 900

# The supported range's ends beside the pinned version: the oldest (3.0, ZooKeeper mode) and
# the newest 4.x served, one broker each, with the transport, leadership, CLI and interop suites
# and a short failover_bench (scripts/kafka-versions.sh without --quick runs the whole matrix).
step "Kafka versions: the oldest and the newest supported (quick)"
scripts/kafka-versions.sh --quick 3.0.2:zookeeper 4.4.0

step "all tests passed"

#!/usr/bin/env bash
# Runs the driver, lifecycle, watch, fleet and simulation tests N times with the CPUs
# oversubscribed (two busy loops per core beside the tests), and prints how many rounds passed. A
# suite whose verdicts depend on thread scheduling fails here.
#
#   scripts/stress-tests.sh [N]        N rounds (default 20)
#   STRESS_BUSY=K                      K busy loops instead of two per core
#
# The tests are built once in the release profile so that rounds take seconds, not minutes; a
# round runs the drivers on all four runtimes, the lifecycle, watch and fleet tests and the
# 10,000-seed simulation (modules of kafka-coordination's test binary, tests/integration/).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export CARGO_TERM_COLOR=never
rounds="${1:-20}"
busy="${STRESS_BUSY:-$(( $(nproc) * 2 ))}"
features="kafka-coordination/tokio,kafka-coordination/smol,kafka-coordination/async-std"
tests=(-p kafka-coordination --test integration)
# The modules of the library's test binary that run (tests/integration/: a module per file).
modules=(drivers:: lifecycle:: watch:: simulation:: fleet::)

cargo test --release --features "$features" "${tests[@]}" --no-run

pids=()
stop_busy() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
}
trap stop_busy EXIT
for _ in $(seq "$busy"); do
    ( while :; do :; done ) &
    pids+=($!)
done
echo "stress: ${busy} busy loops on $(nproc) cores"

passed=0
failed=0
logs="$(mktemp -d)"
for round in $(seq "$rounds"); do
    started=$SECONDS
    if cargo test --release --features "$features" "${tests[@]}" -- "${modules[@]}" >"$logs/round-$round.log" 2>&1; then
        passed=$((passed + 1))
        echo "stress: round $round passed ($((SECONDS - started)) s)"
    else
        failed=$((failed + 1))
        echo "stress: round $round FAILED ($((SECONDS - started)) s); its failures:"
        grep -E "^test .* FAILED|panicked at|^---- " "$logs/round-$round.log" | head -40 || true
    fi
done
echo "stress: ${passed} of ${rounds} rounds passed (logs in $logs)"
[ "$failed" -eq 0 ]

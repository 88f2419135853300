#!/usr/bin/env bash
# The fuzz harness (fuzz/, stable toolchain): random inputs and mutations of valid encodings for
# every record decoder, RoleState, and every parser of broker bytes in the Kafka transport; no
# panic, no broken property, and allocations within the stated bound on every input. Prints
# per-target counts, inputs/s and the largest allocation; exits 1 on any failure (each printed
# with its seed and input in hex).
#
#   scripts/fuzz.sh                       200,000 inputs (the short run; 10-20 s)
#   scripts/fuzz.sh --inputs 10000000     the long run, on demand (a few minutes)
#   scripts/fuzz.sh --replay TARGET:SEED  one failing input again
#   scripts/fuzz.sh --dev ...             use the debug build that `cargo build --workspace`
#                                         already made (scripts/test.sh does), not profile `fuzz`
#
# Other arguments go to the harness: --seed S (a run is a pure function of its seed),
# --target NAME (repeatable; --list names them), --max-failures K.
# Profile `fuzz` is release with overflow checks and debug assertions (root Cargo.toml).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
profile=fuzz
if [ "${1:-}" = "--dev" ]; then
    profile=dev
    shift
fi
exec cargo run --quiet --profile "$profile" -p kafka-coordination-fuzz -- "$@"

#!/usr/bin/env bash
# A longer exhaustive model check of the core's Candidate (crate model/, issue 36) than the one
# `cargo test -p kafka-coordination-model --release` runs. Every knob is an environment
# variable (defaults in brackets); the run prints its state count, depth and time, and every
# counterexample, and exits non-zero when a property fails.
#
#   MODEL_MEMBERS [2]  MODEL_HORIZON [24] (ms of global time)  MODEL_THREADS [2]
#   MODEL_LEASE [8]  MODEL_RENEW [3]  MODEL_STAGGER [3]  MODEL_SKEW [1]  MODEL_SLACK [4]
#   MODEL_CRASHES [1]  MODEL_RESTARTS [1]  MODEL_PAUSES [1]  MODEL_PAUSE [9] (ms)
#   MODEL_LOSSES [1]  MODEL_DELAYS [1]  MODEL_RESIGNS [1]
#   MODEL_FAULTS_BEFORE [-1: any time]  MODEL_FAULTS_AFTER [0]  MODEL_EVICT [0]
#   MODEL_FIND [none]: part of a property name: breadth-first search for its shortest
#                      counterexample instead of the exhaustive run
#   MODEL_MUTATION [none]: early-challenge ignore-fence read-past-lso no-fence shared-pair
#                          failback resign-keeps-lease never-challenge double-answer
#
#   scripts/model-check.sh                          2 members, every fault once, horizon 24
#   MODEL_MEMBERS=3 MODEL_FAULTS_BEFORE=4 MODEL_DELAYS=0 MODEL_RESIGNS=0 scripts/model-check.sh
#
# Memory: the depth-first search keeps a fingerprint per state (about 100 bytes); tens of
# millions of states fit in a few GiB.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cargo build -p kafka-coordination-model --release --bin model-check
exec target/release/model-check

#!/usr/bin/env bash
# A longer exhaustive model check of the core's Candidate (crate model/, issue 36) than the one
# `cargo test -p kafka-coordination-model --release` runs. Every knob is an environment
# variable (defaults in brackets); the run prints its state count, depth and time, and every
# counterexample, and exits non-zero when a property fails.
#
#   MODEL_MEMBERS [2]  MODEL_HORIZON [24] (ms of global time)  MODEL_THREADS [2]
#   MODEL_LEASE [8]  MODEL_RENEW [3]  MODEL_STAGGER [3]  MODEL_SKEW [1]  MODEL_SLACK [4]
#   MODEL_CRASHES [1]  MODEL_RESTARTS [1]  MODEL_PAUSES [1]  MODEL_PAUSE [9] (ms)
#   MODEL_LOSSES [1]  MODEL_DELAYS [1]  MODEL_RESIGNS [1]  MODEL_WITHDRAWS [0]  MODEL_REJOINS [0]
#   MODEL_FAULTS_BEFORE [-1: any time]  MODEL_FAULTS_AFTER [0]  MODEL_EVICT [0]
#   MODEL_FIND [none]: part of a property name: breadth-first search for its shortest
#                      counterexample instead of the exhaustive run
#   MODEL_MUTATION [none]: early-challenge ignore-fence read-past-lso no-fence shared-pair
#                          failback resign-keeps-lease never-challenge double-answer early-rejoin
#
#   scripts/model-check.sh                          2 members, every fault once, horizon 24
#                                                   (hours: horizon 20 did not end in 25 min)
#   MODEL_MEMBERS=3 MODEL_HORIZON=16 MODEL_FAULTS_BEFORE=2 MODEL_DELAYS=0 MODEL_RESIGNS=0 \
#       scripts/model-check.sh                      3 members, a crash, a restart, a pause and a
#                                                   lost answer in the first election: 148
#                                                   million states, about 20 CPU-minutes
#   MODEL_MEMBERS=3 MODEL_HORIZON=14 MODEL_FAULTS_BEFORE=2 MODEL_CRASHES=0 MODEL_RESTARTS=0 \
#       MODEL_PAUSES=0 MODEL_LOSSES=0 MODEL_DELAYS=0 MODEL_WITHDRAWS=1 MODEL_REJOINS=1 \
#       scripts/model-check.sh                      3 members, a balancing member's moves (a
#                                                   resign, a withdraw, a rejoin) in the first
#                                                   election: 58 million states, 11 CPU-minutes
#
# Memory: the depth-first search keeps a fingerprint per state and the states on its stack:
# the 148-million-state run above (88 million unique) peaks at 1.3 GB. A breadth-first
# MODEL_FIND run keeps whole states in its queue: on the 3-member run it passed 24 GB.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cargo build -p kafka-coordination-model --release --bin model-check
exec target/release/model-check

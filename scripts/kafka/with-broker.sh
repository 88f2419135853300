#!/usr/bin/env bash
# Runs CMD with a fresh single-node Kafka test broker: starts it, exports what start.sh prints
# (KAFKA_BOOTSTRAP, and the secured listeners' KAFKA_SASL_SSL_BOOTSTRAP, KAFKA_SSL_BOOTSTRAP,
# KAFKA_OAUTH_BOOTSTRAP, KAFKA_SSL_CA, KAFKA_SSL_CLIENT_CERT/_KEY, KAFKA_SCRAM_*), runs CMD,
# always stops the broker, and exits with CMD's exit code.
#
# Usage: scripts/kafka/with-broker.sh [--brokers 1|3] CMD [ARGS...]
#
# The broker lives in its own run dir (.kafka/run-with-broker-<pid>, or KAFKA_RUN_DIR), so it
# never collides with a broker started by hand with start.sh.
set -uo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$SCRIPT_DIR/../.." && pwd)"

BROKERS=1
if [ "${1:-}" = "--brokers" ]; then
    BROKERS="${2:-}"
    shift 2 || true
fi
if [ $# -eq 0 ]; then
    echo "usage: scripts/kafka/with-broker.sh [--brokers 1|3] CMD [ARGS...]" >&2
    exit 2
fi

export KAFKA_RUN_DIR="${KAFKA_RUN_DIR:-$ROOT/.kafka/run-with-broker-$$}"

cleanup() {
    "$SCRIPT_DIR/stop.sh" || true
    # Keep the last run's broker logs for a look after a failure, and drop the run dir.
    if [ -d "$KAFKA_RUN_DIR/logs" ]; then
        rm -rf "$ROOT/.kafka/last-logs"
        mv "$KAFKA_RUN_DIR/logs" "$ROOT/.kafka/last-logs" 2>/dev/null || true
        echo "with-broker: broker logs kept in $ROOT/.kafka/last-logs" >&2
    fi
    rm -rf "$KAFKA_RUN_DIR"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if ! exports="$("$SCRIPT_DIR/start.sh" --brokers "$BROKERS")"; then
    echo "with-broker: the Kafka test broker did not start; not running: $*" >&2
    exit 1
fi
eval "$exports"
# How many brokers, so tests can pick a replication factor that fits.
export KAFKA_BROKERS="$BROKERS"
echo "with-broker: KAFKA_BOOTSTRAP=$KAFKA_BOOTSTRAP KAFKA_SASL_SSL_BOOTSTRAP=${KAFKA_SASL_SSL_BOOTSTRAP:-} (KAFKA_BROKERS=$KAFKA_BROKERS)" >&2

# CMD runs in the background so a TERM or INT sent to this script reaches it and the broker is
# still stopped (a trap waits for a foreground command to finish first). stdin stays CMD's.
"$@" <&0 &
child=$!
forward() {
    kill "-$1" "$child" 2>/dev/null
    wait "$child" 2>/dev/null
    exit "$2"
}
trap 'forward INT 130' INT
trap 'forward TERM 143' TERM
wait "$child"
status=$?
exit "$status"

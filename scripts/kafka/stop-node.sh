#!/usr/bin/env bash
# Stops one node of the test cluster that scripts/kafka/start.sh started, by its pid file, and
# waits until it is gone. The rest of the cluster keeps running; scripts/kafka/stop.sh still
# stops everything (and skips this node).
#
# Usage: scripts/kafka/stop-node.sh [--kill] N
#
#   N       the node id (1..3; node N is the broker with node.id=N, listed in the cluster's
#           metadata as broker N)
#   --kill  SIGKILL: a crash (the controller moves its partitions after the broker's session
#           times out). Default: SIGTERM, a controlled shutdown that moves them first.
#
# Environment: KAFKA_RUN_DIR (default: .kafka/run), KAFKA_STOP_TIMEOUT seconds (default: 30)
set -uo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$SCRIPT_DIR/../.." && pwd)"
RUN_DIR="${KAFKA_RUN_DIR:-$ROOT/.kafka/run}"
STOP_TIMEOUT="${KAFKA_STOP_TIMEOUT:-30}"

say() { echo "kafka: $*" >&2; }
die() {
    echo "kafka: error: $*" >&2
    exit 1
}

SIGNAL=TERM
if [ "${1:-}" = "--kill" ]; then
    SIGNAL=KILL
    shift
fi
[ $# -eq 1 ] || die "usage: scripts/kafka/stop-node.sh [--kill] N"
NODE="$1"
case "$NODE" in
'' | *[!0-9]*) die "the node id must be a number, got '$NODE'" ;;
esac

pidfile="$RUN_DIR/node-$NODE.pid"
[ -f "$pidfile" ] || die "no pid file $pidfile: node $NODE of the cluster in $RUN_DIR is not running"
pid="$(cat "$pidfile" 2>/dev/null || true)"

# Only signal a pid that is still this node (its command line names its config), so a recycled
# pid is never killed.
ours() {
    kill -0 "$1" 2>/dev/null || return 1
    tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -q -- "$RUN_DIR/node-$NODE/server.properties"
}

if [ -z "$pid" ] || ! ours "$pid"; then
    rm -f "$pidfile"
    die "node $NODE (pid ${pid:-?}) is not running"
fi
kill "-$SIGNAL" "$pid" 2>/dev/null || die "could not signal node $NODE (pid $pid)"
deadline=$((SECONDS + STOP_TIMEOUT))
while ours "$pid"; do
    if [ "$SECONDS" -ge "$deadline" ]; then
        say "node $NODE (pid $pid) did not stop within ${STOP_TIMEOUT}s; killing it"
        kill -KILL "$pid" 2>/dev/null
        sleep 0.5
        break
    fi
    sleep 0.1
done
rm -f "$pidfile"
say "stopped node $NODE (pid $pid, SIG$SIGNAL); its log stays in $RUN_DIR/logs/node-$NODE.log"

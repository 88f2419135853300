#!/usr/bin/env bash
# Starts again one node of the test cluster that scripts/kafka/start.sh started and
# scripts/kafka/stop-node.sh stopped: same configuration, same data directory, same ports. Waits
# until the node answers an ApiVersions request and the cluster lists it (its log of this start
# goes to <run dir>/logs/node-N.log; the log of earlier starts is kept as node-N.log.K).
#
# Usage: scripts/kafka/start-node.sh N
#
# Environment: KAFKA_RUN_DIR (default: .kafka/run), KAFKA_VERSION (default: the version the
#              cluster was started with), KAFKA_HEAP (as start.sh),
#              KAFKA_START_TIMEOUT seconds (default: 120)
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$SCRIPT_DIR/../.." && pwd)"
RUN_DIR="${KAFKA_RUN_DIR:-$ROOT/.kafka/run}"
HEAP="${KAFKA_HEAP:-512m}"
START_TIMEOUT="${KAFKA_START_TIMEOUT:-120}"

say() { echo "kafka: $*" >&2; }
die() {
    echo "kafka: error: $*" >&2
    exit 1
}
# shellcheck source=common.sh
. "$SCRIPT_DIR/common.sh"

[ $# -eq 1 ] || die "usage: scripts/kafka/start-node.sh N"
NODE="$1"
case "$NODE" in
'' | *[!0-9]*) die "the node id must be a number, got '$NODE'" ;;
esac
CONFIG="$RUN_DIR/node-$NODE/server.properties"
[ -f "$CONFIG" ] || die "no $CONFIG: node $NODE is not part of the cluster in $RUN_DIR"
[ -f "$RUN_DIR/log4j2.properties" ] || die "no $RUN_DIR/log4j2.properties: the cluster in $RUN_DIR was stopped"

pidfile="$RUN_DIR/node-$NODE.pid"
if [ -f "$pidfile" ]; then
    pid="$(cat "$pidfile" 2>/dev/null || true)"
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null &&
        tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$CONFIG"; then
        die "node $NODE is running (pid $pid); stop it first with scripts/kafka/stop-node.sh $NODE"
    fi
fi

POM_VERSION="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$SCRIPT_DIR/pom.xml" | head -1)"
VERSION="${KAFKA_VERSION:-$(cat "$RUN_DIR/version" 2>/dev/null || echo "$POM_VERSION")}"
LIB="$ROOT/.kafka/lib-$VERSION"
[ -f "$LIB/.complete" ] || die "no Kafka $VERSION classpath in $LIB (scripts/kafka/start.sh fetches it)"

LOG="$RUN_DIR/logs/node-$NODE.log"
if [ -f "$LOG" ]; then
    k=1
    while [ -e "$LOG.$k" ]; do k=$((k + 1)); done
    mv "$LOG" "$LOG.$k"
fi

JAVA_OPTS=(-Xms"$HEAP" -Xmx"$HEAP" -XX:+UseG1GC -XX:MaxGCPauseMillis=20
    -Djava.awt.headless=true -Dlog4j2.configurationFile="$RUN_DIR/log4j2.properties"
    -Dlog4j.configuration="file:$RUN_DIR/log4j.properties")
# A node that start.sh ran in a network namespace (KAFKA_NODE_NETNS) runs there again.
in_netns=()
[ ! -s "$RUN_DIR/node-$NODE/netns" ] || in_netns=(ip netns exec "$(cat "$RUN_DIR/node-$NODE/netns")")
nohup "${in_netns[@]+"${in_netns[@]}"}" java "${JAVA_OPTS[@]}" -cp "$LIB/*" kafka.Kafka "$CONFIG" >"$LOG" 2>&1 </dev/null &
pid=$!
echo "$pid" >"$pidfile"

# This node's PLAINTEXT address: the broker must answer there and be listed (unfenced).
ADDRESS="$(sed -n 's|^listeners=PLAINTEXT://\([^,]*\).*|\1|p' "$CONFIG" | head -1)"
[ -n "$ADDRESS" ] || die "no PLAINTEXT listener in $CONFIG"
deadline=$((SECONDS + START_TIMEOUT))
while [ "$(live_brokers "$LIB" "$RUN_DIR" "$ADDRESS" "$ADDRESS")" != 1 ]; do
    if ! kill -0 "$pid" 2>/dev/null; then
        tail -30 "$LOG" >&2
        rm -f "$pidfile"
        die "node $NODE (pid $pid) exited during start-up; log: $LOG"
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
        tail -30 "$LOG" >&2
        die "node $NODE did not start within ${START_TIMEOUT}s (pid $pid still runs; stop it with scripts/kafka/stop-node.sh $NODE); log: $LOG"
    fi
    sleep 0.5
done
say "started node $NODE again (pid $pid); log: $LOG"

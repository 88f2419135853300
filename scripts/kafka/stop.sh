#!/usr/bin/env bash
# Stops the test cluster that scripts/kafka/start.sh started (by its pid files), then its
# ZooKeeper server if it has one, and deletes its data. Logs are kept in <run dir>/logs/ unless --purge is given.
#
# Usage: scripts/kafka/stop.sh [--purge]
# Environment: KAFKA_RUN_DIR (default: .kafka/run), KAFKA_STOP_TIMEOUT seconds (default: 30)
set -uo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$SCRIPT_DIR/../.." && pwd)"
RUN_DIR="${KAFKA_RUN_DIR:-$ROOT/.kafka/run}"
STOP_TIMEOUT="${KAFKA_STOP_TIMEOUT:-30}"
PURGE=0
[ "${1:-}" = "--purge" ] && PURGE=1

say() { echo "kafka: $*" >&2; }

if [ ! -d "$RUN_DIR" ]; then
    say "nothing to stop ($RUN_DIR does not exist)"
    exit 0
fi

# Only signal a pid that is still one of our brokers (its command line names this run dir), so a
# recycled pid is never killed.
ours() {
    local pid="$1"
    kill -0 "$pid" 2>/dev/null || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$RUN_DIR/${2:-node-}"
}

pids=()
for pidfile in "$RUN_DIR"/node-*.pid; do
    [ -f "$pidfile" ] || continue
    pid="$(cat "$pidfile" 2>/dev/null || true)"
    if [ -n "$pid" ] && ours "$pid"; then
        kill -TERM "$pid" 2>/dev/null && pids+=("$pid")
    fi
    rm -f "$pidfile"
done

wait_gone() { # wait_gone WHAT PID...
    local what="$1" pid
    shift
    local deadline=$((SECONDS + STOP_TIMEOUT))
    for pid in "$@"; do
        while ours "$pid" "$what"; do
            if [ "$SECONDS" -ge "$deadline" ]; then
                say "pid $pid did not stop within ${STOP_TIMEOUT}s; killing it"
                kill -KILL "$pid" 2>/dev/null
                sleep 0.5
                break
            fi
            sleep 0.3
        done
    done
}
wait_gone node- "${pids[@]+"${pids[@]}"}"

# ZooKeeper mode: the brokers' controlled shutdown needs ZooKeeper, so it stops last.
if [ -f "$RUN_DIR/zookeeper.pid" ]; then
    zk="$(cat "$RUN_DIR/zookeeper.pid" 2>/dev/null || true)"
    if [ -n "$zk" ] && ours "$zk" zookeeper/; then
        kill -TERM "$zk" 2>/dev/null && wait_gone zookeeper/ "$zk"
    fi
    rm -f "$RUN_DIR/zookeeper.pid"
    rm -rf "$RUN_DIR/zookeeper"
fi

for d in "$RUN_DIR"/node-*/; do
    [ -d "$d" ] && rm -rf "$d"
done
rm -f "$RUN_DIR/bootstrap" "$RUN_DIR/version" "$RUN_DIR/log4j2.properties" "$RUN_DIR/log4j.properties" "$RUN_DIR/env"
# The test CA, certificates and keys of this run.
rm -rf "$RUN_DIR/tls"
if [ "$PURGE" = 1 ]; then
    rm -rf "$RUN_DIR"
    say "stopped ${#pids[@]} node(s); removed $RUN_DIR"
else
    say "stopped ${#pids[@]} node(s); data removed, logs kept in $RUN_DIR/logs"
fi

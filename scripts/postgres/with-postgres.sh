#!/usr/bin/env bash
# Runs CMD with a throwaway PostgreSQL cluster: starts it (scripts/postgres/start.sh), exports
# KC_POSTGRES_URL and KC_POSTGRES_DIR, runs CMD, always stops the cluster (also when CMD fails
# or this script is interrupted), and exits with CMD's exit code. The server log is kept in
# .postgres/last-server.log.
#
# Usage: scripts/postgres/with-postgres.sh CMD [ARGS...]
# Nests with scripts/kafka/with-broker.sh in either order.
set -uo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$SCRIPT_DIR/../.." && pwd)"
if [ $# -eq 0 ]; then
    echo "usage: scripts/postgres/with-postgres.sh CMD [ARGS...]" >&2
    exit 2
fi

unset KC_POSTGRES_DIR
cleanup() {
    if [ -n "${KC_POSTGRES_DIR:-}" ]; then
        mkdir -p "$ROOT/.postgres"
        cp "$KC_POSTGRES_DIR/server.log" "$ROOT/.postgres/last-server.log" 2>/dev/null || true
        "$SCRIPT_DIR/stop.sh" "$KC_POSTGRES_DIR" || true
    fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if ! exports="$("$SCRIPT_DIR/start.sh")"; then
    echo "with-postgres: the PostgreSQL test cluster did not start; not running: $*" >&2
    exit 1
fi
eval "$exports"
echo "with-postgres: KC_POSTGRES_URL=$KC_POSTGRES_URL" >&2

# CMD runs in the background so that a TERM or INT sent to this script reaches it and the
# cluster is still stopped. stdin stays CMD's.
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
exit $?

#!/usr/bin/env bash
# Stops the cluster that scripts/postgres/start.sh started and deletes its run dir (data,
# socket and log).
#
# Usage: scripts/postgres/stop.sh [RUN_DIR]      (default: $KC_POSTGRES_DIR)
set -uo pipefail

say() { echo "postgres: $*" >&2; }

dir="${1:-${KC_POSTGRES_DIR:-}}"
if [ -z "$dir" ]; then
    say "stop.sh: no run dir (give it, or set KC_POSTGRES_DIR)"
    exit 2
fi
if [ ! -d "$dir" ]; then
    say "nothing to stop ($dir does not exist)"
    exit 0
fi
# Only a directory start.sh made: never delete anything else.
if [ ! -f "$dir/bin" ] || [ ! -f "$dir/owner" ]; then
    say "$dir is not a run dir of scripts/postgres/start.sh; leaving it alone"
    exit 2
fi
bin="$(cat "$dir/bin")"
owner="$(cat "$dir/owner")"
run_as=()
if [ "$(id -u)" = 0 ] && [ "$owner" != root ]; then
    run_as=(runuser -u "$owner" --)
fi
if [ -f "$dir/data/postmaster.pid" ]; then
    "${run_as[@]+"${run_as[@]}"}" "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 30 stop >/dev/null 2>&1 ||
        "${run_as[@]+"${run_as[@]}"}" "$bin/pg_ctl" -D "$dir/data" -m immediate -w -t 30 stop >/dev/null 2>&1 ||
        say "pg_ctl stop failed (log: $dir/server.log)"
fi
rm -rf "$dir"
say "stopped; removed $dir"

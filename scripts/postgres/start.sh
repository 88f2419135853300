#!/usr/bin/env bash
# Starts a throwaway PostgreSQL cluster for the tests and prints export lines on stdout
# (everything else goes to stderr), so `eval "$(scripts/postgres/start.sh)"` works:
#   KC_POSTGRES_URL   postgres://postgres@127.0.0.1:<port>/postgres (trust authentication on
#                     127.0.0.1 only: a test cluster, never a production one)
#   KC_POSTGRES_DIR   the run dir (data, socket, log); scripts/postgres/stop.sh takes it
#
# initdb and pg_ctl run in a new temporary directory, on a free port of 127.0.0.1. PostgreSQL
# refuses to run as root: when run as root, the cluster runs as the system user `postgres`
# (Debian's package creates it), or as a system user `kc-postgres` created here when there is
# none.
#
# Environment:
#   KC_POSTGRES_BIN   the directory with initdb and pg_ctl (default: pg_config --bindir, else
#                     the newest /usr/lib/postgresql/*/bin)
#   KC_POSTGRES_DIR   the run dir to create (default: a new mktemp -d)
set -euo pipefail

say() { echo "postgres: $*" >&2; }
die() {
    echo "postgres: error: $*" >&2
    exit 1
}

bin="${KC_POSTGRES_BIN:-}"
if [ -z "$bin" ]; then
    if [ -x /usr/lib/postgresql ] && compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
        bin="$(dirname "$(ls -d /usr/lib/postgresql/*/bin/initdb | sort -V | tail -1)")"
    elif command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir)/initdb" ]; then
        bin="$(pg_config --bindir)"
    elif command -v initdb >/dev/null 2>&1; then
        bin="$(dirname "$(command -v initdb)")"
    fi
fi
[ -n "$bin" ] && [ -x "$bin/initdb" ] && [ -x "$bin/pg_ctl" ] ||
    die "initdb and pg_ctl not found (set KC_POSTGRES_BIN, or install PostgreSQL: scripts/ensure-deps.sh installs Debian's postgresql package)"

# ---- the user the server runs as ----------------------------------------------------------
run_as=()
owner="$(id -un)"
if [ "$(id -u)" = 0 ]; then
    if id postgres >/dev/null 2>&1; then
        owner=postgres
    else
        owner=kc-postgres
        if ! id "$owner" >/dev/null 2>&1; then
            say "creating the system user $owner (PostgreSQL refuses to run as root)"
            useradd --system --no-create-home --shell /usr/sbin/nologin "$owner" ||
                die "could not create the system user $owner"
        fi
    fi
    if command -v runuser >/dev/null 2>&1; then
        run_as=(runuser -u "$owner" --)
    else
        run_as=(su -s /bin/sh "$owner" -c '"$0" "$@"')
    fi
fi
as_owner() { "${run_as[@]+"${run_as[@]}"}" "$@"; }

# ---- the run dir and a free port ----------------------------------------------------------
dir="${KC_POSTGRES_DIR:-}"
if [ -z "$dir" ]; then
    dir="$(mktemp -d "${TMPDIR:-/tmp}/kc-postgres.XXXXXX")"
else
    [ ! -e "$dir/data/postmaster.pid" ] || die "a cluster already runs from $dir; stop it with scripts/postgres/stop.sh first"
    mkdir -p "$dir"
fi
chmod 700 "$dir"
[ "$owner" = "$(id -un)" ] || chown "$owner" "$dir"

# shellcheck source=../free-port.sh
. "$(dirname "${BASH_SOURCE[0]}")/../free-port.sh"
port=""
free_port_pick port

# ---- initdb and start ---------------------------------------------------------------------
if ! as_owner "$bin/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --no-sync \
    >"$dir/initdb.log" 2>&1; then
    tail -20 "$dir/initdb.log" >&2
    die "initdb failed (log: $dir/initdb.log)"
fi
# A test cluster: nothing survives it, so no fsync; the socket lives in the run dir.
cat >>"$dir/data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 200
shared_buffers = 32MB
log_min_messages = warning
CONF
if ! as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >"$dir/pg_ctl.log" 2>&1; then
    tail -20 "$dir/server.log" >&2 || true
    as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
    die "the server did not start (log: $dir/server.log)"
fi
echo "$bin" >"$dir/bin"
echo "$owner" >"$dir/owner"
url="postgres://postgres@127.0.0.1:$port/postgres"
say "ready: $url (PostgreSQL $("$bin/postgres" --version | awk '{print $3}'), as $owner, run dir $dir; stop with scripts/postgres/stop.sh)"
printf 'export KC_POSTGRES_URL=%q\n' "$url"
printf 'export KC_POSTGRES_DIR=%q\n' "$dir"

#!/usr/bin/env bash
# The README's first run, as written: takes the shell block under `<!-- first-run` in
# README.md and runs its lines verbatim, in order, in one bash shell with `set -e` (so a
# command that fails fails the run), on a broker of its own (KAFKA_RUN_DIR is a private run
# dir; start.sh picks free ports, so a broker already running elsewhere is left alone).
#
# A line whose comment says `wait until it prints "TEXT"` waits (up to 120 s) until TEXT is in
# the programs' output before the next line runs. Then the script checks the output, in order:
# node-a led; node-b led only after node-a was SIGKILLed; node-b, SIGTERMed, resigned and node-c
# led within 15 s of that SIGTERM (a hand-over, not the 20 to 30 s of a lease running out);
# node-c, SIGTERMed, resigned; three elections in all. The block's `wait %N` lines make the
# SIGTERMed programs' exit statuses the run's. The broker and any program still running are
# stopped on exit, also on failure.
#
#   scripts/first-run.sh        (Rust, Java 17+, Maven; about 2 minutes with a warm build)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

die() {
    echo "first-run: FAILED: $*" >&2
    exit 1
}

# ---- the block ----------------------------------------------------------------------------
mapfile -t lines < <(awk '
    /^<!-- first-run/ { marked = 1; next }
    marked && !inside && /^```sh[[:space:]]*$/ { inside = 1; next }
    inside && /^```/ { exit }
    inside { print }
' README.md)
[ "${#lines[@]}" -gt 0 ] || die "README.md has no \`\`\`sh block after a <!-- first-run --> comment"

work="$(mktemp -d "${TMPDIR:-/tmp}/first-run.XXXXXX")"
export KAFKA_RUN_DIR="$root/.kafka/run-first-run-$$"
log="$work/output.log"
pids="$work/pids"
: >"$pids"
script="$work/run.sh"

cleanup() {
    local status=$?
    # The programs the block started and left running (pids recorded after each line).
    sort -u "$pids" | while read -r pid; do
        [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null || true
    done
    "$root/scripts/kafka/stop.sh" >/dev/null 2>&1 || true
    if [ "$status" -ne 0 ]; then
        echo "first-run: the broker's log: $KAFKA_RUN_DIR/logs (kept)" >&2
    else
        rm -rf "$KAFKA_RUN_DIR"
    fi
    rm -rf "$work"
}
trap cleanup EXIT

# ---- the shell that runs it -----------------------------------------------------------------
{
    echo 'set -euo pipefail'
    # shellcheck disable=SC2016
    printf '%s\n' \
        'wait_for() {' \
        '    local i' \
        '    for i in $(seq 1 600); do' \
        '        if grep -v "^first-run: " "$FIRST_RUN_LOG" | grep -qF -- "$1"; then' \
        '            echo "first-run: \"$1\" after $((SECONDS - line_began)) s"' \
        '            return 0' \
        '        fi' \
        '        sleep 0.2' \
        '    done' \
        '    echo "first-run: \"$1\" was not printed within 120 s" >&2' \
        '    return 1' \
        '}'
    for line in "${lines[@]}"; do
        printf 'line_began=$SECONDS; echo %q\n' "first-run: \$ $line"
        printf '%s\n' "$line"
        printf 'echo "${!:-}" >>"$FIRST_RUN_PIDS"\n'
        if [[ "$line" =~ wait\ until\ it\ prints\ \"([^\"]+)\" ]]; then
            printf 'wait_for %q\n' "${BASH_REMATCH[1]}"
        fi
    done
    echo 'echo "first-run: the block ran to its end"'
} >"$script"

unset KAFKA_BOOTSTRAP KAFKA_SASL_SSL_BOOTSTRAP KAFKA_SSL_BOOTSTRAP KAFKA_OAUTH_BOOTSTRAP
echo "first-run: ${#lines[@]} lines of README.md, broker run dir $KAFKA_RUN_DIR"
status=0
: >"$log"
FIRST_RUN_LOG="$log" FIRST_RUN_PIDS="$pids" timeout 600 bash "$script" >>"$log" 2>&1 &
runner=$!
tail -n +1 -f --pid="$runner" "$log" &
wait "$runner" || status=$?
sleep 0.5 # let tail print the last lines
[ "$status" -eq 0 ] || die "a line of the README's first run failed (exit status $status; output above)"

# ---- what the output must show, in this order -------------------------------------------------
# The line number of the first line that starts with $1 (a command as echoed, or a program's own line).
position() { grep -nF -- "$1" "$log" | grep -F -- ":$1" | head -1 | cut -d: -f1; }
# Each of these, in this order (the line numbers of the output grow down the list).
steps=(
    'node-a leads: token'
    'first-run: $ kill -KILL %1'
    'node-b leads: token'
    'first-run: $ kill -TERM %2'
    'node-b resigned'
    'node-c leads: token'
    'first-run: $ kill -TERM %3'
    'node-c resigned'
)
last=0
for step in "${steps[@]}"; do
    at="$(position "$step")"
    [ -n "$at" ] || die "the output has no line that starts with '$step'"
    [ "$at" -gt "$last" ] || die "'$step' came too early (line $at of the output, before line $last)"
    last="$at"
done
[ "$(grep -c '^node-.* leads: token' "$log")" -eq 3 ] || die "expected exactly three elections in the output"
handover="$(sed -n 's/^first-run: "node-c leads" after \([0-9]*\) s$/\1/p' "$log")"
[ -n "$handover" ] && [ "$handover" -lt 15 ] ||
    die "node-c led ${handover:-?} s after node-b's SIGTERM: a resign should hand over at once"
echo "first-run: OK: node-b took over after node-a's SIGKILL; node-b, SIGTERMed, resigned and"
echo "first-run: node-c led ${handover} s later; node-c, SIGTERMed, resigned; both exited 0"

#!/usr/bin/env bash
# What the published crates would ship (`cargo package --list`, nothing built): each has its
# Cargo.toml, README.md, LICENSE and src/lib.rs (the tool's crate: src/main.rs), nothing from
# target/ or .kafka/, and no file over 512 KiB. `cargo package -p kafka-coordination-core
# -p kafka-coordination-transport -p kafka-coordination-kafka -p kafka-coordination
# -p kafka-coordination-cli` (which also builds each from its package) is the full check before
# a release.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export CARGO_TERM_COLOR=never

status=0
for crate in kafka-coordination-core kafka-coordination-transport kafka-coordination-kafka kafka-coordination kafka-coordination-cli; do
    dir=$(cargo metadata --format-version 1 --no-deps |
        python3 -c 'import json, sys; m = json.load(sys.stdin); print(next(p["manifest_path"] for p in m["packages"] if p["name"] == sys.argv[1]).rsplit("/", 1)[0])' "$crate")
    list=$(cargo package --list --allow-dirty -p "$crate" 2>/dev/null)
    root=src/lib.rs
    [ "$crate" = kafka-coordination-cli ] && root=src/main.rs
    for need in Cargo.toml README.md LICENSE "$root"; do
        if ! grep -qx "$need" <<<"$list"; then
            echo "package-check: $crate does not ship $need" >&2
            status=1
        fi
    done
    if grep -E '^(target|\.kafka)/' <<<"$list" >&2; then
        echo "package-check: $crate ships build or broker output (above)" >&2
        status=1
    fi
    while read -r file; do
        [ -f "$dir/$file" ] || continue
        size=$(stat -L -c %s "$dir/$file")
        if [ "$size" -gt 524288 ]; then
            echo "package-check: $crate ships $file, $size bytes" >&2
            status=1
        fi
    done <<<"$list"
    [ "$status" -eq 0 ] && echo "package-check: $crate: $(wc -l <<<"$list") files" >&2
done
exit "$status"

#!/usr/bin/env bash
# The declared rust-version (workspace Cargo.toml) is at least what the published crates need:
# the highest `rust-version` among the packages that kafka-coordination-core,
# kafka-coordination-transport, kafka-coordination-kafka, kafka-coordination and
# kafka-coordination-cli build with every feature on, their tests and benches included
# (dev-dependencies), as locked in Cargo.lock. Fails, naming the packages that need more,
# when the field is lower. Reads `cargo metadata` only: nothing is built.
#
#   scripts/msrv.sh           the check
#   scripts/msrv.sh --build   also `cargo +<declared> check --all-targets --all-features` of the
#                             crates, when that toolchain is installed (rustup), in target/msrv
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

metadata=$(mktemp)
trap 'rm -f "$metadata"' EXIT
cargo metadata --format-version 1 --all-features --locked >"$metadata"
declared=$(python3 - "$metadata" <<'PY'
import json, sys

meta = json.load(open(sys.argv[1]))
packages = {p["id"]: p for p in meta["packages"]}
nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
roots = [p["id"] for p in meta["packages"]
         if p["name"] in ("kafka-coordination-core", "kafka-coordination-transport",
                          "kafka-coordination-kafka", "kafka-coordination",
                          "kafka-coordination-cli")]

def version(v):
    parts = [int(x) for x in (v or "0").split(".")]
    return tuple(parts + [0] * (3 - len(parts)))

# Normal and build dependencies all the way down; dev-dependencies of the roots only.
needed = set()
stack = [(r, True) for r in roots]
while stack:
    pid, root = stack.pop()
    if pid in needed:
        continue
    needed.add(pid)
    for dep in nodes[pid]["deps"]:
        kinds = {k["kind"] for k in dep["dep_kinds"]}
        if kinds & {None, "build"} or (root and "dev" in kinds):
            stack.append((dep["pkg"], False))

declared = {packages[r]["rust_version"] for r in roots}
if len(declared) != 1 or None in declared:
    sys.exit(f"msrv: the crates declare different or no rust-version: {declared}")
declared = declared.pop()
need = max(version(packages[p]["rust_version"]) for p in needed)
worst = sorted(
    (f'{packages[p]["name"]} {packages[p]["version"]} (rust-version {packages[p]["rust_version"]})'
     for p in needed if version(packages[p]["rust_version"]) > version(declared)))
need_text = ".".join(str(x) for x in need).removesuffix(".0")
if worst:
    sys.exit(f"msrv: rust-version = {declared} is too low: the dependencies need {need_text}: "
             + ", ".join(worst) + f"; raise [workspace.package] rust-version to {need_text}")
print(f"msrv: rust-version = {declared} covers the {len(needed)} packages built "
      f"(the highest need is {need_text})", file=sys.stderr)
print(declared)
PY
)

if [ "${1:-}" = "--build" ]; then
    if rustup run "$declared" rustc --version >/dev/null 2>&1; then
        CARGO_TARGET_DIR=target/msrv cargo "+$declared" check --locked --all-targets --all-features \
            -p kafka-coordination-core -p kafka-coordination-transport -p kafka-coordination-kafka \
            -p kafka-coordination -p kafka-coordination-cli
    else
        echo "msrv: toolchain $declared is not installed (rustup toolchain install $declared)" >&2
        exit 1
    fi
fi

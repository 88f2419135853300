#!/usr/bin/env bash
# Installs Prometheus's promtool into .tools/bin (in the repository) when it is missing, and
# prints its path. The ops kit's test (examples/tests/ops_kit.rs) runs it on ops/alerts.yml:
# `promtool check rules` and the unit tests of ops/alerts_test.yml.
#
# promtool is built from source through the Go module proxy (`go install`), pinned to one
# Prometheus release, without the service-discovery plugins it does not need for rule checks
# (build tag remove_all_sd). Needs Go 1.21 or newer on PATH: an older toolchain than the one
# the module asks for is fetched by Go itself (GOTOOLCHAIN=auto). Cold, the build takes a few
# minutes (it prints how long); afterwards the binary is reused until PROMTOOL_MODULE_VERSION
# changes.
#
#   scripts/ensure-promtool.sh          prints e.g. /path/to/repo/.tools/bin/promtool
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Prometheus 3.16.0: its Go module versions are v0.3XX.Y for release 3.XX.Y.
version="${PROMTOOL_MODULE_VERSION:-v0.316.0}"
bin="$root/.tools/bin"
stamp="$bin/promtool.version"

if [ -x "$bin/promtool" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$version" ]; then
    echo "$bin/promtool"
    exit 0
fi

if ! command -v go >/dev/null 2>&1; then
    echo "ensure-promtool: go not found; install Go 1.21 or newer (https://go.dev/dl) to build promtool" >&2
    exit 2
fi
go_minor=$(go env GOVERSION | sed -n 's/^go1\.\([0-9]*\).*/\1/p')
if [ -z "$go_minor" ] || [ "$go_minor" -lt 21 ]; then
    echo "ensure-promtool: $(go env GOVERSION) is too old to fetch the toolchain promtool needs; install Go 1.21 or newer" >&2
    exit 2
fi

mkdir -p "$bin"
echo "ensure-promtool: building promtool $version with $(go env GOVERSION) (cold: a few minutes)" >&2
start=$SECONDS
GOBIN="$bin" GOTOOLCHAIN=auto GOFLAGS=-modcacherw \
    go install -tags remove_all_sd "github.com/prometheus/prometheus/cmd/promtool@$version" >&2
echo "$version" >"$stamp"
echo "ensure-promtool: built $bin/promtool in $((SECONDS - start)) s" >&2
echo "$bin/promtool"

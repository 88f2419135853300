#!/usr/bin/env bash
# Installs what the build and the tests need and a fresh machine may lack:
#  - cmake, a C/C++ toolchain, pkg-config, OpenSSL and zlib headers: not for the library (its
#    `kafka` feature is pure Rust), but for the test suite and the examples' chaos suite, whose
#    independent client is rdkafka (a dev-dependency): rdkafka-sys builds librdkafka, with SSL
#    on the system's OpenSSL, and a static libcurl from source,
#  - the openssl command (the Kafka test broker's CA and certificates),
#  - Java 17+ and Maven (the Kafka test broker and the golden-vector check run from Maven
#    Central artifacts),
#  - python3 (the golden-vector generator's --check),
#  - PostgreSQL's server binaries, initdb and pg_ctl (Debian's `postgresql`): the database
#    fence's tests start a throwaway cluster of their own (scripts/postgres/),
#  - libfaketime (Debian's `faketime`): the chaos suite's clock faults preload it into member
#    processes; nft (Debian's `nftables`): its network faults. These two and iproute2 only as
#    root: the suite that uses them needs root and says SKIP without it.
# Uses apt-get when something is missing and we are root; otherwise says what to install.
set -euo pipefail

missing=()
need_cmd() { command -v "$1" >/dev/null 2>&1 || missing+=("$2"); }
need_cmd cmake cmake
need_cmd make make
need_cmd gcc gcc
need_cmd g++ g++
need_cmd pkg-config pkg-config
need_cmd perl perl
need_cmd openssl openssl
need_cmd python3 python3
need_cmd java openjdk-17-jdk-headless
need_cmd mvn maven
# The network and clock fault suite (scripts/chaos-net.sh), which runs only as root: namespaces,
# drop rules and libfaketime. Without root that step says SKIP, so they are not needed.
as_root=0
[ "$(id -u)" = 0 ] && as_root=1
if [ "$as_root" = 1 ]; then
    need_cmd ip iproute2
    need_cmd nft nftables
fi
# initdb is not on PATH on Debian (it lives in /usr/lib/postgresql/<version>/bin).
if ! command -v initdb >/dev/null 2>&1 && ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
    missing+=(postgresql)
fi
if command -v dpkg >/dev/null 2>&1; then
    pkgs=(libssl-dev zlib1g-dev)
    [ "$as_root" = 1 ] && pkgs+=(faketime nftables)
    for pkg in "${pkgs[@]}"; do
        dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
    done
fi

if [ "${#missing[@]}" -gt 0 ]; then
    echo "ensure-deps: installing ${missing[*]}" >&2
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq "${missing[@]}" >/dev/null
    else
        echo "ensure-deps: please install: ${missing[*]}" >&2
        exit 2
    fi
fi

if ! command -v cargo >/dev/null 2>&1; then
    echo "ensure-deps: cargo not found; install Rust (https://rustup.rs) first" >&2
    exit 2
fi
if command -v rustup >/dev/null 2>&1; then
    rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy rustfmt
fi
java_major=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1)
if [ -n "$java_major" ] && [ "$java_major" -lt 17 ]; then
    echo "ensure-deps: Java $java_major found; the Kafka 4.x test broker needs Java 17+" >&2
    exit 2
fi

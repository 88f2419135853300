#!/usr/bin/env bash
# The chaos suite's network faults (scripts/chaos.sh --partitions runs this): three brokers
# (combined broker + controller) and every member process each in a network namespace of its
# own, joined by the bridge kcnbr0 (10.77.0.0/16; the orchestrator is 10.77.0.1 on it, in the
# root namespace). Each fault is a set of nftables drop rules in some namespaces, healed after a
# seeded hold: the leader cut from its role's coordinator, its state partition's leader, its
# data partition's leader or every broker; one-way cuts of the leader (its packets out, or the
# brokers' packets in); a standby or every standby cut from every broker; a broker, or the
# controller quorum's leader, cut from the other two while clients still reach it. The checker
# then prints every fault with its liveness figures.
#
# Usage: scripts/chaos-net.sh [--faults N] [--seed S] [--debug] [-- MORE `chaos run` ARGS]
#
#   --faults N   network faults to inject (default 30)
#   --seed S     the fault sequence's seed (default: from the clock; printed)
#   --debug      the debug build instead of --release
#
# Needs root (namespaces, nftables). Without root it prints a SKIP banner and exits 0. Every
# namespace, veth and the bridge (names starting kcn) are removed at the end, also on failure,
# and leftovers of an earlier run are removed at the start. Exits non-zero on a safety
# violation or when fewer than N faults were injected.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

die() {
    echo "chaos-net.sh: $*" >&2
    exit 2
}

faults=30
seed=""
profile=release
extra=()
while [ $# -gt 0 ]; do
    case "$1" in
    --faults | --seed)
        [ $# -ge 2 ] || die "$1 needs a value"
        case "$2" in '' | *[!0-9]*) die "$1 needs a non-negative integer, got '$2'" ;; esac
        case "$1" in
        --faults) faults="$2" ;;
        --seed) seed="$2" ;;
        esac
        shift 2
        ;;
    --debug)
        profile=debug
        shift
        ;;
    --)
        shift
        extra=("$@")
        break
        ;;
    -h | --help)
        sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    *) die "unknown argument '$1' (try --help)" ;;
    esac
done
[ "$faults" -gt 0 ] || die "--faults must be positive"
[ -n "$seed" ] || seed=$(($(date +%s) % 1000000))

if [ "$(id -u)" != 0 ]; then
    echo "==========================================================================" >&2
    echo "chaos-net.sh: SKIP: network faults need root (ip netns, nftables); not run" >&2
    echo "==========================================================================" >&2
    exit 0
fi
command -v ip >/dev/null || die "no ip command (iproute2)"
if ! command -v nft >/dev/null; then
    scripts/ensure-deps.sh || true
    command -v nft >/dev/null || die "no nft command (apt-get install nftables)"
fi

BRIDGE=kcnbr0
# Removes every namespace, veth and the bridge of this suite (names starting kcn).
teardown() {
    local ns
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^kcn-' || true); do
        ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
        ip netns del "$ns" 2>/dev/null || true
    done
    for link in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep '^kcnv' || true); do
        ip link del "$link" 2>/dev/null || true
    done
    ip link del "$BRIDGE" 2>/dev/null || true
}
teardown

features="kafka-coordination/tokio,kafka-coordination/smol,kafka-coordination/async-std,kafka-coordination/kafka,kafka-coordination/postgres,kafka-coordination-examples/kafka,kafka-coordination-examples/postgres"
target="${CARGO_TARGET_DIR:-$root/target}"
# Under sudo, build as the user who ran it, with their PATH's cargo (sudo's reset PATH rarely
# has a rustup cargo), so that target/ keeps its owner.
build=(cargo build)
if [ -n "${SUDO_USER:-}" ] && [ "$SUDO_USER" != root ] && ! command -v cargo >/dev/null 2>&1; then
    user_path="$(sudo -u "$SUDO_USER" -i sh -c 'echo "$PATH"' 2>/dev/null || true)"
    build=(sudo -u "$SUDO_USER" env "PATH=$user_path" cargo build)
elif [ -n "${SUDO_USER:-}" ] && [ "$SUDO_USER" != root ]; then
    build=(sudo -u "$SUDO_USER" env "PATH=$PATH" cargo build)
fi
if [ "$profile" = release ]; then
    "${build[@]}" --release --workspace --features "$features" --example chaos
else
    "${build[@]}" --workspace --features "$features" --example chaos
fi
bin="$target/$profile/examples/chaos"
[ -x "$bin" ] || die "the build did not produce $bin"

trap teardown EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

ip link add "$BRIDGE" type bridge
ip addr add 10.77.0.1/16 dev "$BRIDGE"
ip link set "$BRIDGE" up
# Bridged frames must not go through the root namespace's iptables (when br_netfilter is
# loaded), so only the namespaces' own rules drop anything.
sysctl -qw net.bridge.bridge-nf-call-iptables=0 2>/dev/null || true
hosts=()
netns=()
for n in 1 2 3; do
    ns="kcn-b$n"
    ip netns add "$ns"
    ip link add "kcnvb$n" type veth peer name eth0 netns "$ns"
    ip link set "kcnvb$n" master "$BRIDGE" up
    ip -n "$ns" addr add "10.77.0.$((10 + n))/16" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    ip netns exec "$ns" nft -f - <<'EOF'
table inet kcn {
  chain input { type filter hook input priority 0; }
  chain output { type filter hook output priority 0; }
}
EOF
    hosts+=("10.77.0.$((10 + n))")
    netns+=("$ns")
done

dir="${CHAOS_DIR:-$root/.kafka/chaos-net/$seed-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$(dirname "$dir")"
export KAFKA_RUN_DIR="${KAFKA_RUN_DIR:-$root/.kafka/run-chaos-net-$$}"
export KAFKA_NODE_HOSTS="${hosts[*]}" KAFKA_NODE_NETNS="${netns[*]}"
echo "chaos-net.sh: seed $seed, 3 brokers in namespaces, $faults network faults; journals in $dir" >&2
status=0
scripts/kafka/with-broker.sh --brokers 3 "$bin" run --brokers 3 --net-faults "$faults" \
    --seed "$seed" --dir "$dir" --kafka-scripts "$root/scripts/kafka" \
    "${extra[@]+"${extra[@]}"}" || status=$?
exit "$status"

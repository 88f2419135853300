# free_port_pick VAR: sets VAR to a TCP port on 127.0.0.1 that nothing listens on, chosen outside the
# kernel's ephemeral range (net.ipv4.ip_local_port_range). Sourced, not run; expects `die`.
#
# A port inside the ephemeral range can be taken between the check and the server's bind by
# the local end of any outgoing connection (a broker of the same cluster dialling its quorum
# peers, for one), and the server then exits with "Address already in use". Below the range
# only a listener can take it. Ports handed out before (FREE_PORTS_TAKEN) are not handed out
# again, which is why this sets a variable rather than printing: a $(...) subshell would lose
# that list.
free_port_pick() {
    local var="$1" lo=32768 hi=60999 range first last p
    if range="$(cat /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null)"; then
        read -r lo hi <<<"$range"
    fi
    if [ "$lo" -gt 12000 ]; then
        first=10000 last=$((lo - 1))
    elif [ "$hi" -lt 63000 ]; then
        first=$((hi + 1)) last=65000
    else
        first=20000 last=60000
    fi
    for _ in $(seq 1 200); do
        p=$((first + (RANDOM * 32768 + RANDOM) % (last - first + 1)))
        case " ${FREE_PORTS_TAKEN:-} " in *" $p "*) continue ;; esac
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            FREE_PORTS_TAKEN="${FREE_PORTS_TAKEN:-} $p"
            printf -v "$var" '%s' "$p"
            return 0
        fi
    done
    die "could not find a free TCP port on 127.0.0.1 between $first and $last"
}

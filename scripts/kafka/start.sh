#!/usr/bin/env bash
# Starts a throwaway Apache Kafka test cluster (KRaft, or ZooKeeper mode on 3.x) on 127.0.0.1 and prints export lines on
# stdout (everything else goes to stderr), so `eval "$(scripts/kafka/start.sh)"` works:
#   KAFKA_BOOTSTRAP                the PLAINTEXT listeners (principal User:ANONYMOUS, a super user)
#   KAFKA_SASL_SSL_BOOTSTRAP       the SASL_SSL listeners (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)
#   KAFKA_SSL_BOOTSTRAP            the SSL listeners that require a client certificate (mutual TLS)
#   KAFKA_OAUTH_BOOTSTRAP          the SASL_PLAINTEXT listeners with OAUTHBEARER (Kafka's unsecured
#                                  JWT validator: alg "none", "sub" the principal, "exp" required),
#                                  and SCRAM-SHA-512 and PLAIN for re-authentication tests, all
#                                  with connections.max.reauth.ms (below)
#   KAFKA_OAUTH_REAUTH_MS          that session limit (KIP-368), in milliseconds
#   KAFKA_SSL_CA                   the PEM CA that signed the brokers' and the client's certificates
#   KAFKA_SSL_CLIENT_CERT/_KEY     a PEM client certificate and key (principal User:CN=kc-client)
#   KAFKA_SCRAM_USER/_PASSWORD     a super user (admin), with PLAIN and both SCRAM credentials
#   KAFKA_SCRAM_LIMITED_USER/_PASSWORD
#                                  a user with the same credentials kinds and no ACL at all
#   KAFKA_MODE                     kraft or zookeeper
#   KAFKA_VERSION                  the Kafka version that runs
# ACLs are enforced (StandardAuthorizer in KRaft mode, AclAuthorizer in ZooKeeper mode); the
# brokers' certificate names 127.0.0.1 and localhost.
#
# Usage: scripts/kafka/start.sh [--brokers 1|3] [--zookeeper]
#
#   --brokers 1   one combined broker+controller node, internal topics with replication 1 (default)
#   --brokers 3   three combined nodes with a 3-voter controller quorum, replication factor 3 and
#                 min.insync.replicas=2 (internal topics and new topics); every node has the
#                 three listeners
#   --zookeeper   ZooKeeper mode (Kafka 3.x only): one ZooKeeper server (from the same Maven
#                 classpath) and brokers without a controller quorum
#
# Versions: 3.0 and newer. KRaft needs 3.5 or newer (earlier KRaft was not production-ready);
# 3.0 to 3.4 run with --zookeeper, 4.x only in KRaft mode. Readiness is checked by asking every
# broker for its ApiVersions, not by reading its log.
#
# Environment:
#   KAFKA_VERSION       Kafka version from Maven Central (default: the one pinned in pom.xml)
#   KAFKA_ZOOKEEPER     1: as --zookeeper (for scripts that start brokers through with-broker.sh)
#   KAFKA_RUN_DIR       where pid files, data and the bootstrap file live (default: .kafka/run)
#   KAFKA_HEAP          JVM heap per node (default: 512m)
#   KAFKA_START_TIMEOUT seconds to wait for the cluster to answer (default: 120)
#   KAFKA_OAUTH_REAUTH_MS  the OAUTHBEARER listeners' connections.max.reauth.ms (default: 10000)
#   KAFKA_NODE_HOSTS    space-separated IPv4 addresses, one per node: node N listens on and
#                       advertises the Nth (default: 127.0.0.1 for every node)
#   KAFKA_NODE_NETNS    space-separated network namespaces, one per node: node N runs under
#                       `ip netns exec` in the Nth (start-node.sh does the same; default: none)
#
# The classpath is built once with Maven into .kafka/lib-<version>/ and reused. Logs go to
# <run dir>/logs/. Stop with scripts/kafka/stop.sh (same KAFKA_RUN_DIR).
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$SCRIPT_DIR/../.." && pwd)"
CACHE="$ROOT/.kafka"
RUN_DIR="${KAFKA_RUN_DIR:-$CACHE/run}"
HEAP="${KAFKA_HEAP:-512m}"
START_TIMEOUT="${KAFKA_START_TIMEOUT:-120}"
OAUTH_REAUTH_MS="${KAFKA_OAUTH_REAUTH_MS:-10000}"
BROKERS=1
MODE=kraft
[ "${KAFKA_ZOOKEEPER:-0}" = 1 ] && MODE=zookeeper

START_ARGS=("$@")
say() { echo "kafka: $*" >&2; }
die() {
    echo "kafka: error: $*" >&2
    exit 1
}

while [ $# -gt 0 ]; do
    case "$1" in
    --brokers)
        [ $# -ge 2 ] || die "--brokers needs a value (1 or 3)"
        BROKERS="$2"
        shift 2
        ;;
    --brokers=*)
        BROKERS="${1#--brokers=}"
        shift
        ;;
    -h | --help)
        sed -n '2,44p' "$0" | sed 's/^# \{0,1\}//' >&2
        exit 0
        ;;
    --zookeeper)
        MODE=zookeeper
        shift
        ;;
    *) die "unknown argument '$1' (usage: start.sh [--brokers 1|3] [--zookeeper])" ;;
    esac
done
case "$BROKERS" in
1 | 3) ;;
*) die "--brokers must be 1 or 3, got '$BROKERS'" ;;
esac

# shellcheck source=common.sh
. "$SCRIPT_DIR/common.sh"

command -v java >/dev/null || die "java not found; Kafka 4.x needs Java 17 or newer"
command -v openssl >/dev/null || die "openssl not found; it makes the test CA and certificates (scripts/ensure-deps.sh installs it)"
JAVA_MAJOR="$(java -version 2>&1 | sed -n 's/.* version "\([0-9]*\).*/\1/p' | head -1)"
if [ -n "$JAVA_MAJOR" ] && [ "$JAVA_MAJOR" -lt 17 ]; then
    die "Java $JAVA_MAJOR found; Kafka 4.x needs Java 17 or newer"
fi

# ---- the classpath ------------------------------------------------------------------------
POM_VERSION="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$SCRIPT_DIR/pom.xml" | head -1)"
VERSION="${KAFKA_VERSION:-$POM_VERSION}"
LIB="$CACHE/lib-$VERSION"
mkdir -p "$CACHE"
version_at_least "$VERSION" "$KAFKA_OLDEST_SUPPORTED" ||
    die "Kafka $VERSION is older than the oldest supported version, $KAFKA_OLDEST_SUPPORTED"
if [ "$MODE" = zookeeper ]; then
    version_at_least "$VERSION" 4.0 && die "Kafka $VERSION has no ZooKeeper mode (4.0 removed it); drop --zookeeper"
else
    version_at_least "$VERSION" "$KAFKA_OLDEST_KRAFT" ||
        die "KRaft on Kafka $VERSION is not production-ready (KRaft needs $KAFKA_OLDEST_KRAFT or newer); add --zookeeper"
fi
if [ ! -f "$LIB/.complete" ]; then
    command -v mvn >/dev/null || die "mvn not found; it is needed once to fetch the Kafka $VERSION jars into $LIB"
    say "fetching Kafka $VERSION and its dependencies with Maven into $LIB (once)"
    rm -rf "$LIB" "$LIB.tmp"
    if ! mvn -B -q -f "$SCRIPT_DIR/pom.xml" -Dkafka.version="$VERSION" \
        dependency:copy-dependencies -DoutputDirectory="$LIB.tmp" >"$CACHE/mvn.log" 2>&1; then
        tail -30 "$CACHE/mvn.log" >&2
        die "Maven could not fetch org.apache.kafka:kafka_2.13:$VERSION (full log: $CACHE/mvn.log)"
    fi
    ls "$LIB.tmp"/kafka_2.13-*.jar >/dev/null 2>&1 || die "Maven ran but $LIB.tmp has no kafka_2.13 jar"
    mv "$LIB.tmp" "$LIB"
    touch "$LIB/.complete"
fi
CLASSPATH="$LIB/*"

# ---- refuse to start twice ----------------------------------------------------------------
if compgen -G "$RUN_DIR/node-*.pid" >/dev/null; then
    for pidfile in "$RUN_DIR"/node-*.pid; do
        pid="$(cat "$pidfile" 2>/dev/null || true)"
        if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
            die "a test cluster is already running from $RUN_DIR (pid $pid, bootstrap $(cat "$RUN_DIR/bootstrap" 2>/dev/null || echo '?')); run scripts/kafka/stop.sh first or set KAFKA_RUN_DIR"
        fi
    done
fi
rm -rf "$RUN_DIR"
mkdir -p "$RUN_DIR/logs"

# ---- free ports ---------------------------------------------------------------------------
# shellcheck source=../free-port.sh
. "$SCRIPT_DIR/../free-port.sh"

declare -a BPORT CPORT SPORT TPORT OPORT HOST NETNS
read -r -a node_hosts <<<"${KAFKA_NODE_HOSTS:-}"
read -r -a node_netns <<<"${KAFKA_NODE_NETNS:-}"
VOTERS=""
ZK_PORT=""
[ "$MODE" = zookeeper ] && free_port_pick ZK_PORT
for n in $(seq 1 "$BROKERS"); do
    HOST[n]="${node_hosts[n - 1]:-127.0.0.1}"
    NETNS[n]="${node_netns[n - 1]:-}"
    free_port_pick "BPORT[$n]"
    free_port_pick "CPORT[$n]"
    free_port_pick "SPORT[$n]"
    free_port_pick "TPORT[$n]"
    free_port_pick "OPORT[$n]"
    VOTERS="${VOTERS:+$VOTERS,}$n@${HOST[n]}:${CPORT[n]}"
done

# ---- TLS material and SASL users ----------------------------------------------------------
# A CA, a broker certificate for 127.0.0.1 and localhost, and a client certificate, all PEM
# (EC P-256 keys, unencrypted PKCS#8). Valid for 30 days: a run dir lives for one test run.
TLS="$RUN_DIR/tls"
mkdir -p "$TLS"
chmod 700 "$TLS"
tls_log="$RUN_DIR/logs/openssl.log"
ossl() { openssl "$@" >>"$tls_log" 2>&1 || die "openssl $1 failed (log: $tls_log)"; }
ossl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
    -subj "/CN=kafka-coordination test CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -keyout "$TLS/ca.key" -out "$TLS/ca.pem"
leaf() { # leaf NAME SUBJECT EXTENSIONS...
    local name="$1" subject="$2"
    shift 2
    printf '%s\n' "basicConstraints=critical,CA:FALSE" \
        "keyUsage=critical,digitalSignature,keyEncipherment" "$@" >"$TLS/$name.ext"
    ossl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "$subject" \
        -keyout "$TLS/$name.key" -out "$TLS/$name.csr"
    ossl x509 -req -in "$TLS/$name.csr" -CA "$TLS/ca.pem" -CAkey "$TLS/ca.key" \
        -set_serial "0x$(openssl rand -hex 16)" -days 30 -extfile "$TLS/$name.ext" \
        -out "$TLS/$name.pem"
    rm -f "$TLS/$name.csr" "$TLS/$name.ext"
}
san=""
for n in $(seq 1 "$BROKERS"); do [ "${HOST[n]}" = 127.0.0.1 ] || san="$san,IP:${HOST[n]}"; done
leaf broker "/CN=localhost" "subjectAltName=IP:127.0.0.1,DNS:localhost$san" "extendedKeyUsage=serverAuth"
leaf client "/CN=kc-client" "extendedKeyUsage=clientAuth"
# The broker's PEM key store: its key, then its certificate chain. Kafka before 3.5 (or so)
# refuses a PEM key store without a key password, so there the key is encrypted (PKCS#8,
# PBE-SHA1-3DES, which every Java reads).
KEY_PASSWORD_LINE=""
if version_at_least "$VERSION" 3.5; then
    cat "$TLS/broker.key" "$TLS/broker.pem" "$TLS/ca.pem" >"$TLS/broker-keystore.pem"
else
    KEY_PASSWORD="key-$(openssl rand -hex 12)"
    ossl pkcs8 -topk8 -v1 PBE-SHA1-3DES -in "$TLS/broker.key" -passout "pass:$KEY_PASSWORD" \
        -out "$TLS/broker-encrypted.key"
    cat "$TLS/broker-encrypted.key" "$TLS/broker.pem" "$TLS/ca.pem" >"$TLS/broker-keystore.pem"
    KEY_PASSWORD_LINE="ssl.key.password=$KEY_PASSWORD"
fi
ADMIN_USER=admin
LIMITED_USER=limited
ADMIN_PASSWORD="admin-$(openssl rand -hex 12)"
LIMITED_PASSWORD="limited-$(openssl rand -hex 12)"
# SCRAM credentials go into the cluster's metadata when the storage is formatted.
SCRAM_ARGS=()
for user in "$ADMIN_USER=$ADMIN_PASSWORD" "$LIMITED_USER=$LIMITED_PASSWORD"; do
    for mech in SCRAM-SHA-256 SCRAM-SHA-512; do
        SCRAM_ARGS+=(--add-scram "$mech=[name=${user%%=*},password=${user#*=}]")
    done
done

if [ "$BROKERS" = 1 ]; then
    RF=1
    MIN_ISR=1
else
    RF=3
    MIN_ISR=2
fi

# ---- configuration ------------------------------------------------------------------------
write_log_configs "$RUN_DIR"

for n in $(seq 1 "$BROKERS"); do
    mkdir -p "$RUN_DIR/node-$n/data"
    h="${HOST[n]}"
    listeners="PLAINTEXT://$h:${BPORT[n]},SASL_SSL://$h:${SPORT[n]},SSL://$h:${TPORT[n]},OAUTH://$h:${OPORT[n]}"
    if [ -n "${NETNS[n]}" ]; then echo "${NETNS[n]}" >"$RUN_DIR/node-$n/netns"; else rm -f "$RUN_DIR/node-$n/netns"; fi
    if [ "$MODE" = kraft ]; then
        cat >"$RUN_DIR/node-$n/server.properties" <<EOF
process.roles=broker,controller
node.id=$n
controller.quorum.voters=$VOTERS
controller.listener.names=CONTROLLER
listeners=$listeners,CONTROLLER://$h:${CPORT[n]}
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL,OAUTH:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
EOF
    else
        cat >"$RUN_DIR/node-$n/server.properties" <<EOF
broker.id=$n
zookeeper.connect=127.0.0.1:$ZK_PORT
zookeeper.connection.timeout.ms=30000
listeners=$listeners
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL,OAUTH:SASL_PLAINTEXT
authorizer.class.name=kafka.security.authorizer.AclAuthorizer
EOF
    fi
    cat >>"$RUN_DIR/node-$n/server.properties" <<EOF
advertised.listeners=$listeners
inter.broker.listener.name=PLAINTEXT
ssl.keystore.type=PEM
ssl.keystore.location=$TLS/broker-keystore.pem
$KEY_PASSWORD_LINE
ssl.truststore.type=PEM
ssl.truststore.location=$TLS/ca.pem
listener.name.ssl.ssl.client.auth=required
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_$ADMIN_USER="$ADMIN_PASSWORD" user_$LIMITED_USER="$LIMITED_PASSWORD";
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.oauth.sasl.enabled.mechanisms=OAUTHBEARER,SCRAM-SHA-512,PLAIN
listener.name.oauth.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="$ADMIN_USER";
listener.name.oauth.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.oauth.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_$ADMIN_USER="$ADMIN_PASSWORD";
listener.name.oauth.oauthbearer.connections.max.reauth.ms=$OAUTH_REAUTH_MS
listener.name.oauth.scram-sha-512.connections.max.reauth.ms=$OAUTH_REAUTH_MS
listener.name.oauth.plain.connections.max.reauth.ms=$OAUTH_REAUTH_MS
super.users=User:ANONYMOUS;User:$ADMIN_USER;User:CN=kc-client
log.dirs=$RUN_DIR/node-$n/data
auto.create.topics.enable=false
num.partitions=1
default.replication.factor=$RF
min.insync.replicas=$MIN_ISR
offsets.topic.replication.factor=$RF
offsets.topic.num.partitions=3
transaction.state.log.replication.factor=$RF
transaction.state.log.min.isr=$MIN_ISR
transaction.state.log.num.partitions=3
share.coordinator.state.topic.replication.factor=$RF
share.coordinator.state.topic.min.isr=$MIN_ISR
share.coordinator.state.topic.num.partitions=1
transaction.abort.timed.out.transaction.cleanup.interval.ms=1000
transaction.remove.expired.transaction.cleanup.interval.ms=60000
group.initial.rebalance.delay.ms=0
log.cleaner.backoff.ms=1000
log.segment.bytes=16777216
log.retention.check.interval.ms=60000
EOF
done

# ---- format (KRaft) or start ZooKeeper (ZooKeeper mode) -------------------------------------
LOG_OPTS=(-Dlog4j2.configurationFile="$RUN_DIR/log4j2.properties" -Dlog4j.configuration="file:$RUN_DIR/log4j.properties")
JAVA_OPTS=(-Xms"$HEAP" -Xmx"$HEAP" -XX:+UseG1GC -XX:MaxGCPauseMillis=20
    -Djava.awt.headless=true "${LOG_OPTS[@]}")
CLUSTER_ID="(ZooKeeper at 127.0.0.1:$ZK_PORT)"

stop_all() {
    KAFKA_RUN_DIR="$RUN_DIR" "$SCRIPT_DIR/stop.sh" >&2 || true
}

if [ "$MODE" = kraft ]; then
    CLUSTER_ID="$(java -cp "$CLASSPATH" "${LOG_OPTS[@]}" kafka.tools.StorageTool random-uuid 2>"$RUN_DIR/logs/storage-tool.log" | tail -1)"
    [ -n "$CLUSTER_ID" ] || die "kafka.tools.StorageTool random-uuid printed nothing (log: $RUN_DIR/logs/storage-tool.log)"
    for n in $(seq 1 "$BROKERS"); do
        if ! java -cp "$CLASSPATH" "${LOG_OPTS[@]}" \
            kafka.tools.StorageTool format -t "$CLUSTER_ID" -c "$RUN_DIR/node-$n/server.properties" \
            "${SCRAM_ARGS[@]}" >>"$RUN_DIR/logs/storage-tool.log" 2>&1; then
            tail -20 "$RUN_DIR/logs/storage-tool.log" >&2
            die "formatting node $n failed (log: $RUN_DIR/logs/storage-tool.log)"
        fi
    done
else
    # One ZooKeeper server, from the zookeeper jar that Kafka 3.x depends on. No admin server:
    # where Kafka's classpath has Jetty (3.9, for one), ZooKeeper starts one on port 8080, and
    # exits ("Unable to start AdminServer, exiting abnormally") when that port is taken, by
    # anything at all, another cluster's ZooKeeper included.
    mkdir -p "$RUN_DIR/zookeeper/data"
    cat >"$RUN_DIR/zookeeper/zoo.cfg" <<EOF
dataDir=$RUN_DIR/zookeeper/data
clientPort=$ZK_PORT
clientPortAddress=127.0.0.1
maxClientCnxns=0
tickTime=2000
admin.enableServer=false
EOF
    nohup java -Xms128m -Xmx256m "${LOG_OPTS[@]}" -Dzookeeper.admin.enableServer=false -cp "$CLASSPATH" \
        org.apache.zookeeper.server.quorum.QuorumPeerMain "$RUN_DIR/zookeeper/zoo.cfg" \
        >"$RUN_DIR/logs/zookeeper.log" 2>&1 </dev/null &
    echo $! >"$RUN_DIR/zookeeper.pid"
    # SCRAM credentials live in ZooKeeper: written before any broker starts.
    zk_deadline=$((SECONDS + START_TIMEOUT))
    for user in "$ADMIN_USER=$ADMIN_PASSWORD" "$LIMITED_USER=$LIMITED_PASSWORD"; do
        pw="${user#*=}"
        until java -Xmx256m -cp "$CLASSPATH" "${LOG_OPTS[@]}" kafka.admin.ConfigCommand \
            --zookeeper "127.0.0.1:$ZK_PORT" --alter --entity-type users --entity-name "${user%%=*}" \
            --add-config "SCRAM-SHA-256=[password=$pw],SCRAM-SHA-512=[password=$pw]" \
            >>"$RUN_DIR/logs/zookeeper-scram.log" 2>&1; do
            if ! kill -0 "$(cat "$RUN_DIR/zookeeper.pid")" 2>/dev/null || [ "$SECONDS" -ge "$zk_deadline" ]; then
                tail -20 "$RUN_DIR/logs/zookeeper.log" "$RUN_DIR/logs/zookeeper-scram.log" >&2
                stop_all
                die "ZooKeeper did not take the SCRAM credentials (logs: $RUN_DIR/logs/zookeeper*.log)"
            fi
            sleep 1
        done
    done
fi

for n in $(seq 1 "$BROKERS"); do
    in_netns=()
    [ -z "${NETNS[n]}" ] || in_netns=(ip netns exec "${NETNS[n]}")
    nohup "${in_netns[@]+"${in_netns[@]}"}" java "${JAVA_OPTS[@]}" -cp "$CLASSPATH" kafka.Kafka "$RUN_DIR/node-$n/server.properties" \
        >"$RUN_DIR/logs/node-$n.log" 2>&1 </dev/null &
    echo $! >"$RUN_DIR/node-$n.pid"
done

BOOTSTRAP=""
SASL_SSL_BOOTSTRAP=""
SSL_BOOTSTRAP=""
OAUTH_BOOTSTRAP=""
for n in $(seq 1 "$BROKERS"); do
    BOOTSTRAP="${BOOTSTRAP:+$BOOTSTRAP,}${HOST[n]}:${BPORT[n]}"
    SASL_SSL_BOOTSTRAP="${SASL_SSL_BOOTSTRAP:+$SASL_SSL_BOOTSTRAP,}${HOST[n]}:${SPORT[n]}"
    SSL_BOOTSTRAP="${SSL_BOOTSTRAP:+$SSL_BOOTSTRAP,}${HOST[n]}:${TPORT[n]}"
    OAUTH_BOOTSTRAP="${OAUTH_BOOTSTRAP:+$OAUTH_BOOTSTRAP,}${HOST[n]}:${OPORT[n]}"
done
say "started $BROKERS node(s) (cluster $CLUSTER_ID, Kafka $VERSION, $MODE mode); waiting up to ${START_TIMEOUT}s for $BOOTSTRAP"

# ---- wait until every broker answers --------------------------------------------------------
# Every broker must answer ApiVersions and be registered (and, in KRaft, unfenced) before
# transactions with replication $RF work.
deadline=$((SECONDS + START_TIMEOUT))
seen=0
while :; do
    for n in $(seq 1 "$BROKERS"); do
        pid="$(cat "$RUN_DIR/node-$n.pid")"
        if ! kill -0 "$pid" 2>/dev/null; then
            log="$RUN_DIR/logs/node-$n.log"
            stop_all
            # A port taken between the check and the bind (by a listener that came up
            # meanwhile): start again on fresh ports, twice at most.
            attempt="${KAFKA_START_ATTEMPT:-1}"
            if grep -q "Address already in use" "$log" && [ "$attempt" -lt 3 ]; then
                say "node $n could not bind a port ($(grep -m1 -o 'failed to bind to [^ ]*' "$log" | sed 's/:$//')); starting again on other ports (attempt $((attempt + 1)) of 3)"
                cp "$log" "$CACHE/bind-failure-node-$n.log" 2>/dev/null || true
                KAFKA_START_ATTEMPT=$((attempt + 1)) exec "$0" "${START_ARGS[@]+"${START_ARGS[@]}"}"
            fi
            # The first errors say why; the tail is the shutdown that followed.
            grep -m10 -E "ERROR|FATAL|Exception" "$log" >&2 || tail -30 "$log" >&2
            die "node $n (pid $pid) exited during start-up; log: $log"
        fi
    done
    seen="$(live_brokers "$LIB" "$RUN_DIR" "$BOOTSTRAP")"
    [ "$seen" -ge "$BROKERS" ] && break
    if [ "$SECONDS" -ge "$deadline" ]; then
        tail -20 "$RUN_DIR/logs/api-versions.out" >&2
        for n in $(seq 1 "$BROKERS"); do tail -10 "$RUN_DIR/logs/node-$n.log" >&2; done
        stop_all
        die "the cluster at $BOOTSTRAP did not report $BROKERS live broker(s) within ${START_TIMEOUT}s (saw $seen); logs: $RUN_DIR/logs/"
    fi
    sleep 1
done

echo "$BOOTSTRAP" >"$RUN_DIR/bootstrap"
echo "$VERSION" >"$RUN_DIR/version"
say "ready: Kafka $VERSION ($MODE), $BROKERS broker(s) at $BOOTSTRAP, SASL_SSL at $SASL_SSL_BOOTSTRAP, mutual TLS at $SSL_BOOTSTRAP, OAUTHBEARER at $OAUTH_BOOTSTRAP (run dir $RUN_DIR; stop with scripts/kafka/stop.sh)"
{
    printf 'export KAFKA_BOOTSTRAP=%q\n' "$BOOTSTRAP"
    printf 'export KAFKA_SASL_SSL_BOOTSTRAP=%q\n' "$SASL_SSL_BOOTSTRAP"
    printf 'export KAFKA_SSL_BOOTSTRAP=%q\n' "$SSL_BOOTSTRAP"
    printf 'export KAFKA_OAUTH_BOOTSTRAP=%q\n' "$OAUTH_BOOTSTRAP"
    printf 'export KAFKA_OAUTH_REAUTH_MS=%q\n' "$OAUTH_REAUTH_MS"
    printf 'export KAFKA_SSL_CA=%q\n' "$TLS/ca.pem"
    printf 'export KAFKA_SSL_CLIENT_CERT=%q\n' "$TLS/client.pem"
    printf 'export KAFKA_SSL_CLIENT_KEY=%q\n' "$TLS/client.key"
    printf 'export KAFKA_SCRAM_USER=%q\n' "$ADMIN_USER"
    printf 'export KAFKA_SCRAM_PASSWORD=%q\n' "$ADMIN_PASSWORD"
    printf 'export KAFKA_SCRAM_LIMITED_USER=%q\n' "$LIMITED_USER"
    printf 'export KAFKA_SCRAM_LIMITED_PASSWORD=%q\n' "$LIMITED_PASSWORD"
    printf 'export KAFKA_VERSION=%q\n' "$VERSION"
    printf 'export KAFKA_MODE=%q\n' "$MODE"
} | tee "$RUN_DIR/env"

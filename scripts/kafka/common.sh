# Helpers shared by start.sh and start-node.sh (sourced, not run). They expect `die` and `say`.

# The supported range: Apache Kafka 3.0 and newer; KRaft from 3.5 (earlier KRaft releases were
# not production-ready), ZooKeeper mode on the 3.x line (4.0 removed it).
KAFKA_OLDEST_SUPPORTED=3.0
KAFKA_OLDEST_KRAFT=3.5

# version_at_least VERSION MAJOR.MINOR: true if VERSION (X.Y.Z) is MAJOR.MINOR or newer.
version_at_least() {
    local v="$1" want="$2"
    local vmaj="${v%%.*}" rest="${v#*.}"
    local vmin="${rest%%.*}"
    local wmaj="${want%%.*}" wmin="${want#*.}"
    case "$vmaj$vmin" in '' | *[!0-9]*) die "cannot read a Kafka version from '$v' (expected X.Y.Z)" ;; esac
    [ "$vmaj" -gt "$wmaj" ] || { [ "$vmaj" -eq "$wmaj" ] && [ "$vmin" -ge "$wmin" ]; }
}

# The BrokerApiVersions tool of this classpath: org.apache.kafka.tools from 3.7 (or so) on,
# kafka.admin before.
api_versions_class() {
    local lib="$1" jar
    for jar in "$lib"/kafka-tools-[0-9]*.jar; do
        if unzip -l "$jar" 2>/dev/null | grep -q ' org/apache/kafka/tools/BrokerApiVersionsCommand.class$'; then
            echo org.apache.kafka.tools.BrokerApiVersionsCommand
            return
        fi
    done
    echo kafka.admin.BrokerApiVersionsCommand
}

# live_brokers LIB RUN_DIR BOOTSTRAP [ADDRESS]: asks the cluster for every broker's ApiVersions
# (the broker's own answer, whatever its logging backend) and prints how many brokers answered
# and are not fenced; with ADDRESS (host:port), prints 1 if that broker is among them, else 0.
# The tool's output of the last call is kept in RUN_DIR/logs/api-versions.out.
live_brokers() {
    local lib="$1" run_dir="$2" bootstrap="$3" address="${4:-}" out
    out="$(timeout 60 java -Xmx256m -cp "$lib/*" \
        -Dlog4j2.configurationFile="$run_dir/log4j2.properties" \
        -Dlog4j.configuration="file:$run_dir/log4j.properties" \
        "$(api_versions_class "$lib")" --bootstrap-server "$bootstrap" 2>&1 || true)"
    printf '%s\n' "$out" >"$run_dir/logs/api-versions.out"
    local lines
    lines="$(printf '%s\n' "$out" | grep -E '^[^ ]+:[0-9]+ \(id: [0-9]+ rack: ' | grep -v 'isFenced: true' || true)"
    if [ -n "$address" ]; then
        if printf '%s\n' "$lines" | grep -q "^$address (id: "; then echo 1; else echo 0; fi
    else
        printf '%s\n' "$lines" | grep -c . || true
    fi
}

# The logging configurations: log4j2 (Kafka 4.x) and log4j 1 / reload4j (Kafka 3.x). Both are
# written; each JVM reads the one its backend knows.
write_log_configs() {
    local run_dir="$1"
    cat >"$run_dir/log4j2.properties" <<'EOF'
status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.stdout.ref = STDOUT
logger.kafka-request.name = kafka.request.logger
logger.kafka-request.level = warn
logger.state-change.name = state.change.logger
logger.state-change.level = warn
logger.log-cleaner.name = kafka.log.LogCleaner
logger.log-cleaner.level = warn
EOF
    cat >"$run_dir/log4j.properties" <<'EOF'
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.state.change.logger=WARN
log4j.logger.kafka.log.LogCleaner=WARN
log4j.logger.org.apache.zookeeper=WARN
EOF
}

#!/usr/bin/env bash
# Checks golden/partitions.json against Apache Kafka's own Utils.murmur2 / Utils.toPositive
# (kafka-clients from Maven Central, version pinned in golden/java/pom.xml).
# Exits non-zero on any mismatch. Uses the default local Maven repository, so after the first
# run it works offline (pass MAVEN_ARGS=-o to force that).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pom="$root/golden/java/pom.xml"
file="$root/golden/partitions.json"

if ! command -v mvn >/dev/null 2>&1; then
    echo "golden-java-check: mvn not found (install Maven and a JDK 17+)" >&2
    exit 2
fi

# compile builds the check; exec:exec runs it in a forked JVM whose exit code fails the build.
# shellcheck disable=SC2086
mvn -q -B -Dstyle.color=never ${MAVEN_ARGS:-} -f "$pom" compile exec:exec -Dgolden.partitions="$file"

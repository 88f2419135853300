#!/usr/bin/env bash
# Builds the Java member of the spec (interop/java, on kafka-clients from Maven Central), writes
# the java classpath the interop tests use, and asserts every golden vector with the Java
# member's own codec. Exits non-zero when the build or any vector fails.
#
#   scripts/interop.sh            build, write the classpath file, run the golden check
#   scripts/interop.sh --print    also print the java command line of the member
#
# The classpath file is interop/java/target/java-member.classpath (one line: the compiled
# classes, then every runtime jar). cli/tests/cli/interop.rs reads it; run the member by hand
# with:  java -cp "$(cat interop/java/target/java-member.classpath)" interop.Member --help
# Uses the default local Maven repository, so after the first run it works offline (pass
# MAVEN_ARGS=-o to force that).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pom="$root/interop/java/pom.xml"
target="$root/interop/java/target"
cpfile="$target/java-member.classpath"

if ! command -v mvn >/dev/null 2>&1 || ! command -v java >/dev/null 2>&1; then
    echo "interop: mvn and java (17+) are needed to build the Java member" >&2
    exit 2
fi

# The member runs on the broker's own client version.
want="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$root/scripts/kafka/pom.xml" | head -1)"
have="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$pom" | head -1)"
if [ "$want" != "$have" ]; then
    echo "interop: interop/java/pom.xml pins kafka-clients $have, the test broker is $want (scripts/kafka/pom.xml): make them equal" >&2
    exit 1
fi

rm -f "$cpfile"
# compile, the dependencies' classpath (target/dependencies.classpath), then the golden check
# in a forked JVM whose exit code fails the build.
# shellcheck disable=SC2086
mvn -q -B -Dstyle.color=never ${MAVEN_ARGS:-} -f "$pom" \
    compile dependency:build-classpath exec:exec -Dgolden.dir="$root/golden"

printf '%s:%s\n' "$target/classes" "$(cat "$target/dependencies.classpath")" >"$cpfile"
echo "interop: the Java member is built; classpath in ${cpfile#"$root"/}" >&2
if [ "${1:-}" = "--print" ]; then
    echo "java -cp $(cat "$cpfile") interop.Member --bootstrap \$KAFKA_BOOTSTRAP --role R --member M"
fi

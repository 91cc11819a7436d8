#!/usr/bin/env bash
# Builds the Spring oracle reader (Maven, pinned versions in pom.xml).
# Outputs: $ROOT/.tools/oracle/spring/{target/spring-reader-1.jar,lib/*.jar}; Maven's
# repository cache: $ROOT/.tools/oracle/m2. Idempotent: skips the build when nothing
# in this folder changed since the last successful one.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../../../.." && pwd)"
OUT="$ROOT/.tools/oracle/spring"
M2="$ROOT/.tools/oracle/m2"

for tool in java mvn; do
  command -v "$tool" >/dev/null || { echo "spring reader: '$tool' not found (needs JDK 17+ and Maven 3.8+)" >&2; exit 1; }
done

stamp="$( { cat "$HERE/pom.xml"; find "$HERE/src" -type f -print0 | sort -z | xargs -0 cat; java -version 2>&1; } | sha256sum | cut -d' ' -f1)"
if [[ -f "$OUT/stamp" && "$(cat "$OUT/stamp")" == "$stamp" && -f "$OUT/target/spring-reader-1.jar" ]]; then
  exit 0
fi

mkdir -p "$OUT" "$M2"
rm -rf "$OUT/lib" "$OUT/stamp"
nice -n 10 mvn -q -B -Dstyle.color=never -f "$HERE/pom.xml" -Dmaven.repo.local="$M2" -Doracle.out="$OUT" package >&2
echo "$stamp" >"$OUT/stamp"

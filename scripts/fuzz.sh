#!/usr/bin/env bash
# Runs the fuzz targets of fuzz/ one after another, each for SECONDS
# (default 60), and says per target how many inputs it ran and whether it
# found anything. Installs what it needs: a nightly toolchain (rustup) and
# cargo-fuzz (pinned below). Exits non-zero if any target crashed, naming
# the input that did it (fuzz/artifacts/<target>/).
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]
#
# Environment: FUZZ_SANITIZER (default none: ratebound is safe Rust, and
# AddressSanitizer halves the runs; "address" turns it on), FUZZ_ARGS (more
# libFuzzer options, e.g. "-seed=1").
set -euo pipefail

CARGO_FUZZ_VERSION=0.13.2

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT/fuzz"

usage() { echo "usage: $0 [SECONDS] [TARGET...]" >&2; exit 2; }
SECONDS_EACH=60
if [[ $# -gt 0 ]]; then
  case "$1" in
    -h|--help) usage ;;
    ''|*[!0-9]*) ;;
    *) SECONDS_EACH="$1"; shift ;;
  esac
fi
[[ "$SECONDS_EACH" -gt 0 ]] || usage

if ! command -v rustup >/dev/null; then
  echo "fuzz: rustup is required (it installs the nightly toolchain cargo-fuzz needs)" >&2
  exit 1
fi
if ! rustup run nightly rustc --version >/dev/null 2>&1; then
  echo "fuzz: rustup toolchain install nightly --profile minimal"
  rustup toolchain install nightly --profile minimal
fi
if [[ "$(cargo fuzz --version 2>/dev/null)" != "cargo-fuzz $CARGO_FUZZ_VERSION" ]]; then
  echo "fuzz: cargo install cargo-fuzz --version $CARGO_FUZZ_VERSION --locked"
  cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked
fi

SANITIZER="${FUZZ_SANITIZER:-none}"
TRIPLE="$(rustc +nightly -vV | sed -n 's/^host: //p')"

mapfile -t known < <(cargo +nightly fuzz list)
if [[ $# -gt 0 ]]; then
  targets=("$@")
  for t in "${targets[@]}"; do
    if ! printf '%s\n' "${known[@]}" | grep -qx -- "$t"; then
      echo "fuzz: no target $t; the targets are: ${known[*]}" >&2
      exit 2
    fi
  done
else
  targets=("${known[@]}")
fi

# Built once, every target in one cargo build; the binaries are then run
# directly (`cargo fuzz run` would build again before each target). Debug
# assertions and overflow checks are on (cargo-fuzz's default): an overflow
# is a finding even though the release module would wrap.
echo "fuzz: building the targets (sanitizer $SANITIZER)"
cargo +nightly fuzz build --sanitizer "$SANITIZER"
BIN="$ROOT/fuzz/target/$TRIPLE/release"

mkdir -p logs
failed=0
summary=()
for t in "${targets[@]}"; do
  log="logs/$t.log"
  mkdir -p "corpus/$t"
  echo "fuzz: $t for ${SECONDS_EACH}s (log: fuzz/$log)"
  set +e
  mkdir -p "artifacts/$t"
  # shellcheck disable=SC2086  # FUZZ_ARGS is a list of options
  "$BIN/$t" -artifact_prefix="$ROOT/fuzz/artifacts/$t/" \
    -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 ${FUZZ_ARGS:-} "corpus/$t" >"$log" 2>&1
  rc=$?
  set -e
  runs=$(sed -n 's/^stat::number_of_executed_runs: *\([0-9]*\).*/\1/p' "$log" | tail -n1)
  # The last status line: "#N DONE cov: C ft: F corp: K/S ..." (or the one
  # before a crash).
  status=$(grep -E '^#[0-9]+' "$log" | tail -n1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$status")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$status")
  corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9]*[a-zA-Z]*\).*/\1/p' <<<"$status")
  [[ -n "$runs" ]] || runs=$(sed -n 's/^#\([0-9]*\).*/\1/p' <<<"$status")
  line="$t: ${runs:-?} runs in ${SECONDS_EACH}s, cov ${cov:-?} ft ${ft:-?} corpus ${corp:-?}"
  if [[ $rc -eq 0 ]]; then
    line="$line, nothing found"
  else
    failed=1
    artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n1)
    line="$line, FOUND: exit $rc, input ${artifact:-(none written: see fuzz/$log)}"
    grep -m1 -E 'panicked at|ERROR: libFuzzer' "$log" || true
  fi
  echo "fuzz: $line"
  summary+=("$line")
done

echo
echo "fuzz: summary (${SECONDS_EACH}s per target, sanitizer $SANITIZER)"
printf '  %s\n' "${summary[@]}"
if [[ $failed -ne 0 ]]; then
  echo "fuzz: reproduce with: cd fuzz && cargo +nightly fuzz run --sanitizer $SANITIZER TARGET ARTIFACT" >&2
  echo "fuzz: minimise with:  cd fuzz && cargo +nightly fuzz tmin --sanitizer $SANITIZER TARGET ARTIFACT" >&2
fi
exit "$failed"

#!/usr/bin/env bash
# Mutation testing of the request path's core with cargo-mutants: the
# counting engine (src/count), the pipeline (src/pipeline), the node's life
# (src/node), identity (src/identity) and the configuration's validation
# (src/config/written/validate). A mutant that survives is a behaviour no test
# pins down; docs/testing.md says how to read a run and records the last.
#
#   scripts/mutants.sh [PATH...]          # default: every folder above
#   scripts/mutants.sh src/count/window.rs src/pipeline/limiter/commit.rs
#
# Installs cargo-mutants (pinned below) into the git-ignored .tools/ when
# missing. Each mutant is built and tested with the library's own tests
# only (`cargo test --lib --no-default-features`: the unit, pipeline, node
# and store-suite tests, not the CLI's; about 8 s a mutant on 2 cores). A
# mutant that survives them is then checked against the whole native suite
# (`MUTANTS_FULL=1 MUTANTS_ARGS="--iterate"`) before it is called a
# survivor. Output: mutants.out/ (git-ignored; `--iterate` reads it).
#
# Environment:
#   MUTANTS_FULL    1: build and run every native test (`cargo test`), not
#                   only the library's
#   MUTANTS_SHARD   k/n: test only that shard of the mutants (e.g. 0/4)
#   MUTANTS_JOBS    parallel builds (default 1: the machine has 2 cores)
#   MUTANTS_TIMEOUT seconds a mutant's tests may take (default 90; the
#                   library's take about 8 s, the whole suite much longer:
#                   raise it with MUTANTS_FULL)
#   MUTANTS_ARGS    more cargo-mutants options (e.g. "--re take_alone",
#                   "--iterate", "--in-diff my.diff", "--list")
set -euo pipefail

# Pinned: the newest release on crates.io when this script was written.
CARGO_MUTANTS_VERSION=27.1.0

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

TOOL="$ROOT/.tools/cargo-mutants"
BIN="$TOOL/bin/cargo-mutants"
if ! [[ -x "$BIN" ]] || ! "$BIN" mutants --version | grep -q " $CARGO_MUTANTS_VERSION$"; then
  echo "installing cargo-mutants $CARGO_MUTANTS_VERSION into $TOOL" >&2
  cargo install "cargo-mutants@$CARGO_MUTANTS_VERSION" --locked --root "$TOOL"
fi

if [[ $# -eq 0 ]]; then
  set -- src/count src/pipeline src/node src/identity src/config/written/validate
fi
files=()
for p in "$@"; do
  if [[ -d "$p" ]]; then
    files+=(--file "${p%/}/**/*.rs")
  else
    files+=(--file "$p")
  fi
done

args=(
  --jobs "${MUTANTS_JOBS:-1}"
  --timeout "${MUTANTS_TIMEOUT:-90}"
  --build-timeout 900
  --no-shuffle
  --profile mutants
  # The core alone: the filter (filter/) and the CLI (cli/) are other crates.
  --package ratebound
)
if [[ "${MUTANTS_FULL:-0}" != 1 ]]; then
  # For the build as well as the run: `cargo test --no-run` alone would
  # build every test, bench and example for each mutant. Without the
  # default features: the readings `explain` and `structure` and their
  # tests are not the request path.
  args+=(--cargo-arg=--lib --no-default-features)
fi
if [[ -n "${MUTANTS_SHARD:-}" ]]; then
  args+=(--shard "$MUTANTS_SHARD")
fi
# shellcheck disable=SC2206 # MUTANTS_ARGS is split on purpose
extra=(${MUTANTS_ARGS:-})

# Shares the machine: lowest priority but one.
exec nice -n 10 "$BIN" mutants "${files[@]}" "${args[@]}" "${extra[@]}"

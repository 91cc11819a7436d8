#!/usr/bin/env bash
# Installs Debian's MariaDB server and client (mariadbd, mariadb-install-db,
# mariadb) for the collation oracle (tests/oracle: scripts/gen-collation-table.py
# asks a real server how its collations weigh every character, and
# tests/oracle/test_collation.py checks the account key against it). The
# tests start their own private server (tests/oracle/mariadb.py); the
# package's system service is never started. Idempotent: an installed
# server is kept.
set -euo pipefail

if command -v mariadbd >/dev/null 2>&1 && command -v mariadb-install-db >/dev/null 2>&1 \
  && command -v mariadb >/dev/null 2>&1; then
  exit 0
fi
echo "install-mariadb: installing Debian's mariadb-server and mariadb-client (apt-get)"
# Runs as root (CI and the development machines); no sudo. policy-rc.d
# refuses service starts during the install, so no server is left running.
policy=/usr/sbin/policy-rc.d
made_policy=0
if [[ ! -e "$policy" ]]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy"
  chmod +x "$policy"
  made_policy=1
fi
log="$(mktemp)"
trap 'if [[ $made_policy == 1 ]]; then rm -f "$policy"; fi; rm -f "$log"' EXIT
if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
  --no-install-recommends mariadb-server mariadb-client; } </dev/null >"$log" 2>&1; then
  cat "$log" >&2
  exit 1
fi
echo "install-mariadb: $(command -v mariadbd) ($(mariadbd --version 2>&1 | head -n1))"

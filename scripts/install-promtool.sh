#!/usr/bin/env bash
# Installs promtool, Prometheus's checker, and the Prometheus server, for the
# tests of the alert rules (envoy-demo/prometheus/ratebound-rules.yaml) and of
# the Grafana dashboard's queries (tests/e2e/test_prometheus.py: promtool
# checks them, a real Prometheus scraping a real Envoy runs them): Debian's
# package `prometheus` provides /usr/bin/promtool and /usr/bin/prometheus.
# Idempotent: existing ones are kept.
set -euo pipefail

if command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1; then
  echo "install-promtool: $(command -v promtool) and $(command -v prometheus) already there ($(promtool --version 2>&1 | head -n1))"
  exit 0
fi
echo "install-promtool: installing Debian's prometheus package (apt-get) for promtool"
# Runs as root (CI and the development machines); no sudo. policy-rc.d
# refuses service starts during the install, so no Prometheus server is left
# running behind the tests.
policy=/usr/sbin/policy-rc.d
made_policy=0
if [[ ! -e "$policy" ]]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy"
  chmod +x "$policy"
  made_policy=1
fi
trap 'if [[ $made_policy == 1 ]]; then rm -f "$policy"; fi' EXIT
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus
echo "install-promtool: $(command -v promtool) ($(promtool --version 2>&1 | head -n1))"

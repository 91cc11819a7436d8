"""Metrics a dashboard can use: with envoy-demo/stats-tags.yaml merged into
the bootstrap, /stats/prometheus shows ratebound's instance, route and bound
as labels (ratebound_refused{ratebound_instance=..,ratebound_route=..,
ratebound_bound=..}), an operation's bound `<operation>.<bound>` included;
the alert rules (envoy-demo/prometheus/ratebound-rules.yaml) and every query
of the Grafana dashboard (envoy-demo/grafana/ratebound.json) pass promtool,
and every metric the dashboard and the rules ask for is in the scrape."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

import processes
from harness import ROOT, free_port, grpc_cluster, request

DEMO = ROOT / "envoy-demo"
STATS_TAGS = DEMO / "stats-tags.yaml"
RULES = DEMO / "prometheus" / "ratebound-rules.yaml"
DASHBOARD = DEMO / "grafana" / "ratebound.json"
LABELS = ("ratebound_instance", "ratebound_route", "ratebound_bound")

# Route `api`: a route bound, a per-address bound, a shadow bound, and an
# operation (payOrder) with a bound of its own, `payOrder.addr`. Route
# `sign-in` (a name with a dash): an installation bound whose rate-limit
# service is a port nobody listens on, so each call is an rls_error
# (on_error: allow) and an rls_latency_ms sample.
CFG = {
    "instance": "shop",
    "rate_limit_service": {"cluster": "rls", "domain": "shop", "timeout_ms": 200,
                           "on_error": "allow"},
    "routes": [
        {"name": "api", "match": {"path_prefix": "/api"},
         "bounds": [
             {"name": "whole_route", "per": "route", "limit": 1000, "window": "PT1M"},
             {"name": "per_address", "per": "address", "limit": 3, "window": "PT1M"},
             {"name": "dry", "per": "address", "limit": 1, "window": "PT1M", "shadow": True},
         ],
         "operations": [
             {"operation_id": "payOrder", "method": "POST", "path": "/api/orders/{id}/pay",
              "bounds": [{"name": "addr", "per": "address", "limit": 1, "window": "PT1M"}]},
         ]},
        {"name": "sign-in", "match": {"path_prefix": "/login"},
         "bounds": [
             {"name": "attempts", "per": "address", "scope": "installation", "limit": 100,
              "window": "PT1M"},
         ]},
        # An installation cost bound (tokens a response header names): the
        # instance's cost stats, costs_unsent among them.
        {"name": "llm", "match": {"path_prefix": "/llm"},
         "bounds": [
             {"name": "tokens", "per": "address", "scope": "installation", "limit": 10000,
              "window": "PT1M", "cost": {"response_header": "x-tokens", "unit": "tokens"}},
         ]},
        # A fleet bound: its sync with the (unreachable) service fails.
        {"name": "fleet", "match": {"path_prefix": "/fleet"},
         "bounds": [
             {"name": "budget", "per": "route", "scope": "fleet", "limit": 1000,
              "window": "PT1M"},
         ]},
    ],
}
RULE_TESTS = DEMO / "prometheus" / "ratebound-rules.test.yaml"
RUNBOOK = ROOT / "docs" / "runbook.md"


def parse_prometheus(text: str) -> tuple[dict, dict]:
    """({(name, frozenset(labels)): value}, {name: type}) of the text format."""
    series: dict = {}
    types: dict = {}
    line_re = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
    label_re = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            types[name] = kind
            continue
        if not line or line.startswith("#"):
            continue
        m = line_re.match(line)
        assert m, f"not Prometheus text format: {line!r}"
        name, labels, value = m.groups()
        key = (name, frozenset(label_re.findall(labels or "")))
        series[key] = float(value)
    return series, types


def value(series: dict, name: str, **labels) -> float:
    key = (name, frozenset(labels.items()))
    assert key in series, (
        f"no series {name}{labels}; ratebound series: "
        + "\n".join(f"{n}{dict(l)}" for n, l in series if n.startswith("ratebound")))
    return series[key]


@pytest.fixture(scope="module")
def promtool():
    tool = shutil.which("promtool")
    assert tool, "promtool is missing: run scripts/install-promtool.sh (test.sh does)"
    return tool


def test_prometheus_labels_for_instance_route_and_bound(envoy, upstream, tmp_path, promtool):
    dead = free_port()  # the rate-limit service's port: nobody listens there
    e = envoy(CFG, upstream_port=upstream.port, clusters=[grpc_cluster("rls", dead)],
              config_yaml=STATS_TAGS.read_text())
    # The bootstrap Envoy runs has the tags (not only the file we handed it).
    dump = json.loads(e.admin("/config_dump"))
    boot = next(c["bootstrap"] for c in dump["configs"] if c["@type"].endswith("BootstrapConfigDump"))
    assert [t["tag_name"] for t in boot["stats_config"]["stats_tags"]] == list(LABELS)

    a, b = "127.0.8.1", "127.0.8.2"
    # /api from a: 3 admitted, 2 refused by per_address; the shadow bound
    # `dry` (1 a minute) would have refused the 2nd and 3rd. A request
    # refused by one bound is counted by no other.
    assert [request(e.port, "/api/x", src=a)[0] for _ in range(5)] == [200] * 3 + [429] * 2
    # payOrder from b: 1 admitted, then refused by payOrder.addr.
    assert [request(e.port, "/api/orders/7/pay", src=b, method="POST")[0]
            for _ in range(3)] == [200, 429, 429]
    # sign-in: the service is down and on_error is allow: 2 admitted.
    assert [request(e.port, "/login", src=a)[0] for _ in range(2)] == [200, 200]

    # Counters and the tracked gauge reach Envoy on the filter's 1 s tick;
    # histograms show in /stats/prometheus after Envoy's stats flush (5 s).
    e.wait_value(lambda: e.rb("shop", "api", "per_address", "tracked"), lambda v: v == 2)
    e.wait_value(lambda: e.rb("shop", "sign-in", "attempts", "rls_errors"), lambda v: v == 2)
    prom = e.wait_value(lambda: e.admin("/stats/prometheus"),
                        lambda t: 'ratebound_rls_latency_ms_count{ratebound_instance="shop"} 2'
                        in t, timeout=12.0, interval=0.5)
    lines = [l for l in prom.splitlines() if "ratebound" in l]
    print("\n".join(lines))
    (tmp_path / "scrape.txt").write_text(prom)
    series, types = parse_prometheus(prom)

    # No ratebound metric keeps a route or bound in its name.
    names = {n for n, _ in series if n.startswith("ratebound_")}
    assert not any("shop" in n or "api" in n or "per_address" in n for n in names), names

    shop = {"ratebound_instance": "shop"}
    api = {**shop, "ratebound_route": "api"}

    def bound(stat, route_labels, name):
        return value(series, f"ratebound_{stat}", **route_labels, ratebound_bound=name)

    # Per bound: 3 (a) + 1 (b) admitted on /api.
    assert bound("allowed", api, "whole_route") == 4
    assert bound("refused", api, "whole_route") == 0
    assert bound("allowed", api, "per_address") == 4
    assert bound("refused", api, "per_address") == 2
    assert bound("tracked", api, "per_address") == 2
    assert bound("overflow", api, "per_address") == 0
    # The shadow bound: a's first and b's first pass it, a's 2nd and 3rd
    # would be refused, and it refuses nothing.
    assert bound("allowed", api, "dry") == 2
    assert bound("would_refuse", api, "dry") == 2
    assert bound("refused", api, "dry") == 0
    # The operation's bound: one dot in its name, a label value as it is.
    assert bound("allowed", api, "payOrder.addr") == 1
    assert bound("refused", api, "payOrder.addr") == 2
    assert bound("overflow", api, "payOrder.addr") == 0
    assert bound("tracked", api, "payOrder.addr") == 1
    assert types["ratebound_tracked"] == "gauge"
    assert types["ratebound_refused"] == "counter"

    # The installation bound, on the route with a dash in its name.
    signin = {**shop, "ratebound_route": "sign-in"}
    assert bound("rls_calls", signin, "attempts") == 2
    assert bound("rls_errors", signin, "attempts") == 2
    assert bound("allowed", signin, "attempts") == 0
    assert bound("refused", signin, "attempts") == 0

    # Per instance: counters and the histogram, labelled with the instance only.
    for stat in ("store_errors", "identity_errors", "session_calls", "session_cache_hits",
                 "jwt_cache_hits", "store_reads_saved", "store_stale_guesses"):
        assert value(series, f"ratebound_{stat}", **shop) >= 0
        assert types[f"ratebound_{stat}"] == "counter"
    assert value(series, "ratebound_store_errors", **shop) == 0
    assert value(series, "ratebound_identity_errors", **shop) == 0
    assert types["ratebound_rls_latency_ms"] == "histogram"
    assert value(series, "ratebound_rls_latency_ms_count", **shop) == 2
    assert value(series, "ratebound_rls_latency_ms_bucket", **shop, le="+Inf") == 2

    # Every ratebound series carries exactly the labels its kind should.
    per_instance = {"store_errors", "identity_errors", "session_calls", "session_cache_hits",
                    "jwt_cache_hits", "store_reads_saved", "store_stale_guesses",
                    "accounts_unreadable", "rls_calls_saved", "rls_no_limit",
                    "rls_latency_ms_bucket", "rls_latency_ms_count", "rls_latency_ms_sum",
                    "fleet_sync_calls", "fleet_sync_keys", "fleet_sync_errors", "fleet_alone",
                    "fleet_nodes", "costs_unknown", "costs_unsent", "requests_unclear",
                    "usage_asked"}
    for name, labels in series:
        if not name.startswith("ratebound_"):
            continue
        keys = {k for k, _ in labels} - {"le"}
        want = {"ratebound_instance"} if name[len("ratebound_"):] in per_instance \
            else set(LABELS)
        assert keys == want, (name, dict(labels))

    # The dashboard and the rules query only metrics the scrape has.
    scraped = {n for n, _ in series}
    exprs = dashboard_queries() + dashboard_variable_queries() + [r["expr"] for r in alert_rules()]
    asked = set()
    for expr in exprs:
        for word in re.findall(r"\bratebound_[a-z_]+\b", expr):
            if word not in LABELS:
                assert word in scraped, f"{word} (in {expr!r}) is not in the scrape"
                asked.add(word)
    print(f"metrics the dashboard and the rules ask for: {sorted(asked)}")

    # promtool reads the scrape as valid exposition format.
    out = subprocess.run([promtool, "check", "metrics"], input=prom, capture_output=True,
                         text=True, timeout=30)
    # Exit 3 is lint findings only (Envoy's counters, ratebound's included,
    # have no _total suffix); 1 is an error, such as a line it cannot parse.
    assert out.returncode in (0, 3), out.stderr
    assert "error while linting" not in out.stderr, out.stderr


# --------------------------------------------------------------------------
# The dashboard and the alert rules
# --------------------------------------------------------------------------
def dashboard_panels() -> list[dict]:
    doc = json.loads(DASHBOARD.read_text())
    panels = []
    for p in doc["panels"]:
        panels.append(p)
        panels.extend(p.get("panels", []))  # collapsed rows
    return [p for p in panels if p.get("type") != "row"]


def dashboard_queries() -> list[str]:
    return [t["expr"] for p in dashboard_panels() for t in p.get("targets", [])]


def dashboard_variable_queries() -> list[str]:
    doc = json.loads(DASHBOARD.read_text())
    return [v["query"]["query"] for v in doc["templating"]["list"] if v["type"] == "query"]


def alert_rules() -> list[dict]:
    """The alerts of the rules file: name and expression (.venv has no YAML
    library; the file keeps each on one line, and promtool checks the whole)."""
    rules, cur = [], None
    for line in RULES.read_text().splitlines():
        m = re.match(r"\s*- alert: (\S+)", line)
        if m:
            cur = {"alert": m.group(1)}
            rules.append(cur)
            continue
        m = re.match(r"\s*expr: (.+)$", line)
        if m and cur is not None and "expr" not in cur:
            expr = m.group(1).strip()
            assert expr not in ("|", ">", "|-", ">-"), "keep each expr on one line"
            cur["expr"] = expr.strip("'\"")
    return rules


def test_alert_rules_pass_promtool(promtool):
    out = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True,
                         text=True, timeout=60)
    print(out.stdout, out.stderr)
    assert out.returncode == 0, out.stdout + out.stderr
    names = [r["alert"] for r in alert_rules()]
    assert len(names) >= 5 and len(set(names)) == len(names), names
    assert re.search(r"SUCCESS: (\d+) rules found", out.stdout).group(1) == str(len(names))


def test_every_rule_waits_and_has_a_runbook_entry():
    doc = yaml.safe_load(RULES.read_text())
    rules = [r for g in doc["groups"] for r in g["rules"]]
    anchors = {"#" + re.sub(r"[^a-z0-9-]", "", h.strip().lower().replace(" ", "-"))
               for h in re.findall(r"^## (.+)$", RUNBOOK.read_text(), re.M)}
    for r in rules:
        assert r.get("for"), f"{r['alert']} has no `for:`: it would fire on one evaluation"
        url = r["annotations"]["runbook_url"]
        assert url == f"docs/runbook.md#{r['alert'].lower()}", url
        assert url.removeprefix("docs/runbook.md") in anchors, f"{url}: no such heading"
        assert r["labels"]["severity"] in ("critical", "warning", "info"), r["alert"]


def test_the_rules_timing_passes_promtools_unit_tests(promtool):
    """One event never pages; recurring failures do; the rules on metrics
    no Envoy here produces (istio-agent's fetch count, VM reloads) fire on
    series named as Istio and Envoy name them."""
    out = subprocess.run([promtool, "test", "rules", RULE_TESTS.name], capture_output=True,
                         text=True, timeout=60, cwd=RULE_TESTS.parent)
    assert out.returncode == 0, out.stdout + out.stderr
    tested = set(re.findall(r"alertname: (\w+)", RULE_TESTS.read_text()))
    assert {"RateboundModuleFetchFailing", "RateboundVmReloaded", "RateboundVmReloadFailing",
            "RateboundFilterSilent", "RateboundStoreErrors", "RateboundFleetSyncFailing",
            "RateboundFleetDecidingAlone", "RateboundCostsUnsent", "RateboundServingDenyAll",
            "RateboundServingAllowAll", "RateboundPushRejected"} <= tested, tested


def test_every_dashboard_query_parses(promtool, tmp_path):
    doc = json.loads(DASHBOARD.read_text())
    assert doc["title"] and doc["uid"], "a dashboard needs a title and a uid"
    panels = dashboard_panels()
    assert len(panels) >= 8, len(panels)
    ids = [p["id"] for p in panels]
    assert len(set(ids)) == len(ids), f"panel ids repeat: {ids}"
    for p in panels:
        assert p.get("targets"), f"panel {p.get('title')!r} has no query"
        for t in p["targets"]:
            assert t["datasource"]["uid"] == "${datasource}", (p["title"], t)
    # Each query as a recording rule: promtool parses every expression. The
    # dashboard's variables ($instance...) and $__rate_interval are replaced
    # first, as Grafana would.
    subst = {"$__rate_interval": "1m", "$instance": ".*", "$route": ".*", "$bound": ".*"}
    lines = ["groups:", "- name: dashboard", "  rules:"]
    queries = dashboard_queries()
    for i, expr in enumerate(queries):
        for k, v in subst.items():
            expr = expr.replace(k, v)
        assert "$" not in expr, f"an unknown variable in {expr!r}"
        lines += [f"  - record: dashboard:query_{i}", f"    expr: {json.dumps(expr)}"]
    f = tmp_path / "dashboard-rules.yaml"
    f.write_text("\n".join(lines) + "\n")
    out = subprocess.run([promtool, "check", "rules", str(f)], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr + f.read_text()
    assert f"SUCCESS: {len(queries)} rules found" in out.stdout, out.stdout


# --------------------------------------------------------------------------
# The demo's bootstraps have the tags
# --------------------------------------------------------------------------
@pytest.mark.parametrize("script,args", [
    ("run.sh", ["envoy.yaml.in", "ratebound.json", "OUT", "ROOT", "10000", "9901", "10001"]),
    ("run-installation.sh", ["envoy.yaml.in", "rls-cluster.yaml.in",
                             "ratebound-installation.json", "OUT", "ROOT", "10000", "9901",
                             "10002", "18081"]),
])
def test_the_demo_bootstraps_have_the_stats_tags(script, args, tmp_path):
    """The render step of each demo script, as the script runs it (its
    Python here-document), then Envoy's own validation of the result."""
    from harness import envoy_binary

    text = (DEMO / script).read_text()
    steps = [d for d in re.findall(r"<<'PY'\n(.*?)\nPY\n", text, re.S) if "@STATS_CONFIG@" in d]
    assert len(steps) == 1, f"{script}: no render step with @STATS_CONFIG@"
    out = tmp_path / "envoy.yaml"
    argv = [str(out) if a == "OUT" else str(ROOT) if a == "ROOT"
            else str(DEMO / a) if a.endswith((".in", ".json")) else a for a in args]
    r = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-", *argv], input=steps[0],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    rendered = out.read_text()
    assert not re.search(r"^[^#]*@[A-Z_]+@", rendered, re.M), "a placeholder is left"
    assert STATS_TAGS.read_text() in rendered
    # run-installation.sh exports the key secret its configuration names.
    env = {**os.environ, "RATEBOUND_KEY_SECRET": "demo-secret-0123456789abcdef"}
    v = subprocess.run([envoy_binary(), "--mode", "validate", "-c", str(out)],
                       capture_output=True, text=True, timeout=60, env=env)
    assert v.returncode == 0, v.stdout[-3000:] + v.stderr[-3000:]


# --------------------------------------------------------------------------
# A real Prometheus scraping a real Envoy: the dashboard's queries return
# the series, and the alert rules load and fire
# --------------------------------------------------------------------------
def impatient_rules(tmp_path) -> Path:
    """The rules as shipped but for `for:` (minutes, a page's patience; the
    promtool unit tests check it): 1 s, so that they fire within a test."""
    rules = tmp_path / "rules.yaml"
    rules.write_text(re.sub(r"(?m)^(\s+for:) \d+m$", r"\1 1s", RULES.read_text()))
    assert rules.read_text().count("for: 1s") == len(alert_rules())
    return rules


class Prometheus:
    """Debian's Prometheus server (the package that brings promtool), on a
    free port, scraping `targets` every second and evaluating `rules`."""

    def __init__(self, tmp_path, targets: list[str], rules,
                 others: dict[str, list[str]] | None = None) -> None:
        """others: more jobs by name, their targets serving /metrics (the
        way istio-agent and istiod serve theirs)."""
        self.port = free_port()
        cfg = tmp_path / "prometheus.yml"
        jobs = [("envoy", "/stats/prometheus", targets)] + \
            [(name, "/metrics", t) for name, t in (others or {}).items()]
        cfg.write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            f"rule_files: [{json.dumps(str(rules))}]\n"
            "scrape_configs:\n" + "".join(
                f"- job_name: {name}\n"
                f"  metrics_path: {path}\n"
                f"  static_configs: [{{targets: {json.dumps(t)}}}]\n" for name, path, t in jobs))
        self.log = open(tmp_path / "prometheus.log", "wb")
        server = shutil.which("prometheus")
        assert server, "prometheus is missing: run scripts/install-promtool.sh (test.sh does)"
        self.proc = processes.popen(
            [server, f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def api(self, path: str, **params) -> dict:
        import urllib.parse
        import urllib.request
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params, doseq=True)
        with urllib.request.urlopen(url, timeout=5) as r:
            doc = json.loads(r.read())
        assert doc["status"] == "success", doc
        return doc["data"]

    def wait(self, what, read, pred, timeout: float = 30.0):
        import time
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"prometheus exited {self.proc.returncode}"
            try:
                last = read()
                if pred(last):
                    return last
            except OSError as e:  # not listening yet
                last = e
            time.sleep(0.25)
        raise AssertionError(f"prometheus: {what}: last {last!r}")

    def firing(self) -> set[str]:
        return {a["labels"]["alertname"] for a in self.api("alerts")["alerts"]
                if a["state"] == "firing"}

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self.log.close()


def test_a_real_prometheus_runs_the_dashboard_and_fires_the_rules(envoy, upstream, tmp_path):
    dead = free_port()  # the rate-limit service: nobody listens there
    e = envoy(CFG, upstream_port=upstream.port, clusters=[grpc_cluster("rls", dead)],
              config_yaml=STATS_TAGS.read_text())
    rules = impatient_rules(tmp_path)
    prom = Prometheus(tmp_path, [f"127.0.0.1:{e.admin_port}"], rules)
    try:
        # A scrape before the traffic, so that rate() has two samples.
        prom.wait("the Envoy target up", lambda: prom.api("targets")["activeTargets"],
                  lambda t: t and t[0]["health"] == "up")
        prom.wait("a first sample", lambda: prom.api("query", query="ratebound_allowed")["result"],
                  lambda r: len(r) > 0)
        a = "127.0.8.3"
        assert [request(e.port, "/api/x", src=a)[0] for _ in range(6)] == [200] * 3 + [429] * 3
        assert [request(e.port, "/login", src=a)[0] for _ in range(2)] == [200, 200]
        # Fleet traffic: decided alone, its syncs fail (nobody answers).
        assert [request(e.port, "/fleet", src=a)[0] for _ in range(5)] == [200] * 5
        e.wait_value(lambda: e.rb("shop", "sign-in", "attempts", "rls_errors"), lambda v: v == 2)

        subst = {"$__rate_interval": "1m", "$instance": ".*", "$route": ".*", "$bound": ".*"}

        def run(expr):
            for k, v in subst.items():
                expr = expr.replace(k, v)
            return prom.api("query", query=expr)["result"]

        def by_series(expr):
            return {json.dumps(s["metric"], sort_keys=True): float(s["value"][1])
                    for s in run(expr)}

        # The refusals show in the refused-per-bound query, per route and bound.
        refused_q = next(q for q in dashboard_queries() if q.startswith(
            "sum by (ratebound_instance, ratebound_route, ratebound_bound) (rate(ratebound_refused"))
        per_address = json.dumps({"ratebound_instance": "shop", "ratebound_route": "api",
                                  "ratebound_bound": "per_address"}, sort_keys=True)
        prom.wait("the refusals in the refused-per-bound panel", lambda: by_series(refused_q),
                  lambda r: r.get(per_address, 0) > 0)
        tracked_q = next(q for q in dashboard_queries() if "ratebound_tracked" in q)
        prom.wait("one caller tracked by per_address", lambda: by_series(tracked_q),
                  lambda r: r.get(per_address) == 1)
        # Every query of the dashboard runs and returns series (histograms
        # reach /stats/prometheus on Envoy's 5 s stats flush: wait for them).
        for expr in dashboard_queries():
            prom.wait(f"series for {expr!r}", lambda: run(expr), bool, timeout=20.0)
        # The variables' label_values(): what Grafana asks the label API.
        assert prom.api("label/ratebound_instance/values",
                        **{"match[]": "ratebound_allowed"}) == ["shop"]
        assert "sign-in" in prom.api("label/ratebound_route/values",
                                     **{"match[]": 'ratebound_allowed{ratebound_instance="shop"}'})
        # The rules load, and the one about the unreachable service fires.
        groups = prom.api("rules")["groups"]
        loaded = {r["name"] for g in groups for r in g["rules"]}
        assert loaded == {r["alert"] for r in alert_rules()}, loaded
        want = {("RateboundRateLimitServiceErrors", "sign-in"),
                ("RateboundFleetSyncFailing", None), ("RateboundFleetDecidingAlone", None)}
        firing = prom.wait(
            f"{sorted(n for n, _ in want)} firing",
            lambda: {(al["labels"]["alertname"], al["labels"].get("ratebound_route"))
                     for al in prom.api("alerts")["alerts"] if al["state"] == "firing"},
            lambda f: want <= f, timeout=30.0)
        print(f"firing from a real Envoy: {sorted(firing)}")
        # Nothing overflowed, the store had no error, the module never
        # reloaded, the filter is not silent: those stay quiet.
        assert not {n for n, _ in firing} & {
            "RateboundOverflow", "RateboundStoreErrors", "RateboundFilterSilent",
            "RateboundVmReloaded", "RateboundVmReloadFailing"}, firing
        # The VM reload rules' selector names a real Envoy's stat.
        reloads = run('{__name__=~"envoy_wasm_.*ratebound.*_vm_reload"}')
        assert [s["metric"]["__name__"] for s in reloads] == ["envoy_wasm_ratebound_vm_reload"], reloads
    finally:
        prom.stop()


def test_a_real_prometheus_finds_the_filter_silent_on_an_envoy_without_it(envoy, tmp_path):
    """RateboundFilterSilent from a real Envoy: one that serves without the
    module (what a proxy whose fetch failed, or whose stats are dropped,
    looks like to Prometheus) fires it; nothing else fires."""
    e = envoy(None, http_filters=[])
    rules = tmp_path / "rules.yaml"
    rules.write_text(re.sub(r"(?m)^(\s+for:) \d+m$", r"\1 1s", RULES.read_text()))
    prom = Prometheus(tmp_path, [f"127.0.0.1:{e.admin_port}"], rules)
    try:
        prom.wait("the Envoy target up", lambda: prom.api("targets")["activeTargets"],
                  lambda t: t and t[0]["health"] == "up")
        assert request(e.port, "/hello")[0] == 200
        firing = prom.wait(
            "RateboundFilterSilent firing",
            lambda: {al["labels"]["alertname"] for al in prom.api("alerts")["alerts"]
                     if al["state"] == "firing"},
            lambda f: "RateboundFilterSilent" in f)
        assert firing == {"RateboundFilterSilent"}, firing
    finally:
        prom.stop()

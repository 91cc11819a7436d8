"""The Helm chart (deploy/helm/ratebound), rendered with the pinned helm
(scripts/install-helm.sh) the way an operator installs it: every object it
renders for each placement (the ingress gateway by label, a Gateway API
gateway, a waypoint) is checked against the CRDs of every Istio line the docs
claim (test_istio_crd.SUPPORTED), its pluginConfig with `ratebound check`,
and the cluster it adds for the rate-limit service, mutual TLS included, is
loaded by a real Envoy of each tested line (`--mode validate`).
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from launcher import envoy_binary
from test_istio_crd import SUPPORTED, validate

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "ratebound"
TOOLS = Path(os.environ.get("RATEBOUND_TOOLS", ROOT / ".tools"))
HELM = TOOLS / "bin" / "helm"
ENVOY_136 = TOOLS / "envoy-1.36" / "envoy" / "_bin" / "envoy"
CLI = ROOT / "dist" / "ratebound"
DIGEST = "ab" * 32

GATEWAY = [{"kind": "Gateway", "group": "gateway.networking.k8s.io", "name": "public"}]
WAYPOINT = [{"kind": "Gateway", "group": "gateway.networking.k8s.io", "name": "waypoint"}]
SERVICE = [{"kind": "Service", "group": "", "name": "orders"}]
FLEET = {
    "instance": "api",
    "rate_limit_service": {"cluster": "ratebound-rls", "domain": "api", "sync_ms": 500,
                           "fleet_nodes": 3, "key_secret": {"env": "RATEBOUND_KEY_SECRET"}},
    "routes": [{"name": "api", "match": {"path_prefix": "/api"},
                "bounds": [{"name": "per_address", "per": "address", "limit": 300,
                            "window": "PT1M", "scope": "fleet"}]}],
}


def helm(*args: str, values: dict | None = None, tmp: Path | None = None,
         check: bool = True) -> subprocess.CompletedProcess:
    assert HELM.exists(), f"{HELM} is missing: run scripts/install-helm.sh"
    cmd = [str(HELM), *args]
    if values is not None:
        assert tmp is not None
        path = tmp / f"values{len(list(tmp.glob('values*.json')))}.json"
        path.write_text(json.dumps(values))  # JSON is YAML
        cmd += ["-f", str(path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT)
    if check:
        assert proc.returncode == 0, f"{cmd}: exit {proc.returncode}\n{proc.stderr}"
    return proc


def render(tmp: Path, values: dict, namespace: str = "istio-system") -> list[dict]:
    out = helm("template", "rb", str(CHART), "-n", namespace,
               values={"image": {"sha256": DIGEST}, **values}, tmp=tmp).stdout
    return [d for d in yaml.safe_load_all(out) if d]


PLACEMENTS = {
    "ingressgateway": {},
    # The key secret's variable is named once, in the configuration: the
    # chart derives the WasmPlugin's vmConfig.env from it.
    "ingressgateway-rls-plaintext": {"rateLimitService": {"enabled": True, "mtls": False},
                                     "config": FLEET},
    "gateway-api-fleet": {"targetRefs": GATEWAY, "rateLimitService": {"enabled": True},
                          "config": FLEET, "priority": 10},
    # An older values file naming it again, the same: still accepted.
    "waypoint-service-fleet": {"targetRefs": SERVICE, "envoyFilterTargetRefs": WAYPOINT,
                               "rateLimitService": {"enabled": True},
                               "config": FLEET, "keySecret": {"env": "RATEBOUND_KEY_SECRET"}},
}


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_every_rendered_object_passes_every_claimed_istio_line(placement, tmp_path):
    docs = render(tmp_path, PLACEMENTS[placement])
    kinds = sorted(d["kind"] for d in docs)
    rls = PLACEMENTS[placement].get("rateLimitService", {}).get("enabled", False)
    # The dashboard, the rules, the stats tags' custom bootstrap; the
    # EnvoyFilter of the rate-limit service's cluster when enabled.
    assert kinds == sorted(["ConfigMap", "ConfigMap", "ConfigMap", "WasmPlugin"]
                           + (["EnvoyFilter"] if rls else [])), kinds
    for doc in docs:
        if doc["kind"] == "ConfigMap":
            continue
        for version in SUPPORTED:
            assert validate(version, doc) == [], (placement, version, doc["kind"])
    plugin = next(d for d in docs if d["kind"] == "WasmPlugin")
    assert plugin["spec"]["sha256"] == DIGEST
    assert plugin["metadata"]["namespace"] == "istio-system"
    targets = PLACEMENTS[placement].get("targetRefs")
    if targets:
        assert plugin["spec"]["targetRefs"] == targets and "selector" not in plugin["spec"]
    else:
        assert plugin["spec"]["selector"] == {"matchLabels": {"istio": "ingressgateway"}}
    for ef in (d for d in docs if d["kind"] == "EnvoyFilter"):
        want = PLACEMENTS[placement].get("envoyFilterTargetRefs") or targets
        if want:
            assert ef["spec"]["targetRefs"] == want, ef["metadata"]["name"]
        else:
            assert ef["spec"]["workloadSelector"] == {"labels": {"istio": "ingressgateway"}}


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_the_plugin_config_passes_ratebound_check(placement, tmp_path):
    docs = render(tmp_path, PLACEMENTS[placement])
    plugin = next(d for d in docs if d["kind"] == "WasmPlugin")
    path = tmp_path / "plugin.yaml"
    path.write_text(yaml.safe_dump(plugin))
    proc = subprocess.run([str(CLI), "check", str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    if PLACEMENTS[placement].get("config") is FLEET:
        assert plugin["spec"]["vmConfig"]["env"] == [{"name": "RATEBOUND_KEY_SECRET",
                                                      "valueFrom": "HOST"}]
    else:
        assert "vmConfig" not in plugin["spec"]


def keyed(env: str) -> dict:
    return {**FLEET, "rate_limit_service": {**FLEET["rate_limit_service"],
                                            "key_secret": {"env": env}}}


def test_the_vm_env_is_the_variable_the_configuration_names(tmp_path):
    # Renamed in the configuration alone: the VM gets the new name.
    docs = render(tmp_path, {"config": keyed("SHOP_KEY")})
    plugin = next(d for d in docs if d["kind"] == "WasmPlugin")
    assert plugin["spec"]["vmConfig"]["env"] == [{"name": "SHOP_KEY", "valueFrom": "HOST"}]
    # Inline, for a test installation: the value is written into the plugin,
    # and `ratebound check` reads it as the filter would.
    docs = render(tmp_path, {"config": keyed("SHOP_KEY"),
                             "keySecret": {"valueFrom": "INLINE", "value": "s" * 16}})
    plugin = next(d for d in docs if d["kind"] == "WasmPlugin")
    assert plugin["spec"]["vmConfig"]["env"] == [
        {"name": "SHOP_KEY", "valueFrom": "INLINE", "value": "s" * 16}]
    path = tmp_path / "inline.yaml"
    path.write_text(yaml.safe_dump(plugin))
    proc = subprocess.run([str(CLI), "check", str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout
    # Too short inline: check says the filter would refuse it.
    plugin["spec"]["vmConfig"]["env"][0]["value"] = "short"
    path.write_text(yaml.safe_dump(plugin))
    proc = subprocess.run([str(CLI), "check", str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "inline with 5 bytes" in proc.stdout, proc.stdout


def test_a_rotations_other_secret_reaches_the_vm_too(tmp_path):
    config = keyed("KEY_NEW")
    config["rate_limit_service"]["key_secret"]["also_read"] = {"env": "KEY_OLD"}
    plugin = next(d for d in render(tmp_path, {"config": config}) if d["kind"] == "WasmPlugin")
    assert plugin["spec"]["vmConfig"]["env"] == [
        {"name": "KEY_NEW", "valueFrom": "HOST"}, {"name": "KEY_OLD", "valueFrom": "HOST"}]
    inline = render(tmp_path, {"config": config, "keySecret": {
        "valueFrom": "INLINE", "value": "n" * 16, "alsoReadValue": "o" * 16}})
    plugin = next(d for d in inline if d["kind"] == "WasmPlugin")
    assert plugin["spec"]["vmConfig"]["env"] == [
        {"name": "KEY_NEW", "valueFrom": "INLINE", "value": "n" * 16},
        {"name": "KEY_OLD", "valueFrom": "INLINE", "value": "o" * 16}]
    path = tmp_path / "rotating.yaml"
    path.write_text(yaml.safe_dump(plugin))
    proc = subprocess.run([str(CLI), "check", str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout
    # Without the old variable in the VM, check says what the filter would.
    plugin["spec"]["vmConfig"]["env"].pop()
    path.write_text(yaml.safe_dump(plugin))
    proc = subprocess.run([str(CLI), "check", str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "key_secret.also_read.env" in proc.stdout, proc.stdout


@pytest.mark.parametrize("values, words", [
    ({"config": FLEET, "keySecret": {"env": "OTHER"}},
     'keySecret.env "OTHER" is not the variable the configuration reads'),
    ({"config": FLEET, "keySecret": {"valueFrom": "INLINE"}},
     "keySecret.valueFrom INLINE needs the value of"),
    ({"config": FLEET, "keySecret": {"valueFrom": "SECRET"}},
     'keySecret.valueFrom "SECRET": HOST'),
])
def test_a_second_name_or_no_source_for_the_key_secret_is_refused(values, words, tmp_path):
    proc = helm("template", "rb", str(CHART), values={"image": {"sha256": DIGEST}, **values},
                tmp=tmp_path, check=False)
    assert proc.returncode != 0 and words in proc.stderr, proc.stderr


def test_a_chart_without_a_digest_is_refused(tmp_path):
    proc = helm("template", "rb", str(CHART), check=False)
    assert proc.returncode != 0 and "image.sha256 is required" in proc.stderr, proc.stderr


@pytest.mark.parametrize("spelling", ["sha256:" + "0" * 64, "0" * 63, "A" * 64])
def test_a_digest_spelled_otherwise_than_istio_compares_is_refused(spelling, tmp_path):
    """istio-agent compares the bare lower-case hex; any other spelling makes
    it serve its deny-all filter (tests/e2e/test_istio_agent_wasm.py)."""
    proc = helm("template", "rb", str(CHART), "--set", f"image.sha256={spelling}", check=False)
    assert proc.returncode != 0 and "64 lower-case hex digits" in proc.stderr, proc.stderr


def test_a_service_target_needs_the_waypoint_for_the_cluster(tmp_path):
    proc = helm("template", "rb", str(CHART), values={
        "image": {"sha256": DIGEST}, "targetRefs": SERVICE,
        "rateLimitService": {"enabled": True}}, tmp=tmp_path, check=False)
    assert proc.returncode != 0, proc.stdout
    assert "set envoyFilterTargetRefs to the waypoint that serves orders" in proc.stderr


def test_the_dashboard_rules_and_stats_tags_are_the_repository_files(tmp_path):
    docs = render(tmp_path, {"dashboard": {"labels": {"grafana_dashboard": "1"}}})
    maps = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ConfigMap"}
    dash = maps["ratebound-dashboard"]
    assert dash["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dash["data"]["ratebound.json"]) == json.loads(
        (ROOT / "envoy-demo" / "grafana" / "ratebound.json").read_text())
    rules = maps["ratebound-rules"]["data"]["ratebound-rules.yaml"]
    assert yaml.safe_load(rules) == yaml.safe_load(
        (ROOT / "envoy-demo" / "prometheus" / "ratebound-rules.yaml").read_text())
    # The stats tags: a custom bootstrap for istio-agent (the pod annotation
    # sidecar.istio.io/bootstrapOverride names it), no EnvoyFilter BOOTSTRAP
    # patch, which Istio no longer applies (tests/e2e/test_istiod.py runs it).
    boot = json.loads(maps["ratebound-bootstrap"]["data"]["custom_bootstrap.json"])
    # ...plus the stats of Istio's fallback filters, which Istio's stats
    # matcher drops (tests/e2e/test_istio_agent_wasm.py scrapes them).
    matcher = boot["stats_config"].pop("stats_matcher")
    assert matcher == {"inclusion_list": {"patterns": [
        {"suffix": "rbac.wasm-default-deny.denied"}, {"suffix": "rbac.wasm-default-allow.allowed"}]}}
    assert boot == yaml.safe_load((ROOT / "envoy-demo" / "stats-tags.yaml").read_text())
    assert not [d for d in docs if d["kind"] == "EnvoyFilter"]
    hosted = render(tmp_path, {"rules": {"runbookBase": "https://wiki.example/ratebound"}})
    text = next(d for d in hosted if d["metadata"]["name"] == "ratebound-rules")["data"]["ratebound-rules.yaml"]
    urls = [r["annotations"]["runbook_url"] for g in yaml.safe_load(text)["groups"] for r in g["rules"]]
    assert urls and all(u.startswith("https://wiki.example/ratebound#ratebound") for u in urls), urls
    off = render(tmp_path, {"dashboard": {"enabled": False}, "rules": {"enabled": False},
                            "statsTags": {"enabled": False}})
    assert [d["kind"] for d in off] == ["WasmPlugin"]


def test_helm_lint(tmp_path):
    out = helm("lint", str(CHART), "--set", f"image.sha256={DIGEST}")
    assert "1 chart(s) linted, 0 chart(s) failed" in out.stdout, out.stdout


def envoys() -> list[str]:
    found = [envoy_binary()]
    if ENVOY_136.exists() and str(ENVOY_136) not in found:
        found.append(str(ENVOY_136))
    return found


@pytest.mark.parametrize("mtls", [True, False], ids=["mtls", "plaintext"])
def test_a_real_envoy_of_each_line_loads_the_rls_cluster(mtls, tmp_path):
    """The cluster the EnvoyFilter adds, in a bootstrap beside a stand-in for
    istio-agent's SDS cluster (sds-grpc), through Envoy's own config
    validation (field names, types, values; it does not resolve the SDS
    cluster name, which istio-agent provides)."""
    docs = render(tmp_path, {"rateLimitService": {"enabled": True, "mtls": mtls}})
    ef = next(d for d in docs if d["metadata"]["name"] == "ratebound-rls")
    cluster = ef["spec"]["configPatches"][0]["patch"]["value"]
    assert ("transport_socket" in cluster) == mtls
    sds = {"name": "sds-grpc", "type": "STATIC", "connect_timeout": "1s",
           "typed_extension_protocol_options": cluster["typed_extension_protocol_options"],
           "load_assignment": {"cluster_name": "sds-grpc", "endpoints": [{"lb_endpoints": [
               {"endpoint": {"address": {"pipe": {"path": str(tmp_path / "sds.sock")}}}}]}]}}
    bootstrap = tmp_path / "bootstrap.json"
    bootstrap.write_text(json.dumps({"node": {"id": "router~10.0.0.1~gw.istio-system~istio-system.svc.cluster.local", "cluster": "gw"},
                                     "static_resources": {"clusters": [sds, cluster]}}))
    assert len(envoys()) == 2, f"{ENVOY_136} is missing: run scripts/install-envoy-lines.sh"
    for binary in envoys():
        proc = subprocess.run([binary, "--mode", "validate", "-c", str(bootstrap)],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, f"{binary}: {proc.stdout[-2000:]}{proc.stderr[-2000:]}"
        assert "configuration" in proc.stdout and "OK" in proc.stdout, proc.stdout[-500:]


def test_the_shipped_envoyfilter_adds_the_charts_cluster(tmp_path):
    """envoy-demo/istio/envoyfilter-rls.yaml (applied by hand) and the chart
    add the same cluster, mutual TLS included."""
    shipped = yaml.safe_load((ROOT / "envoy-demo" / "istio" / "envoyfilter-rls.yaml").read_text())
    docs = render(tmp_path, {"rateLimitService": {"enabled": True}})
    chart = next(d for d in docs if d["metadata"]["name"] == "ratebound-rls")
    value = lambda d: d["spec"]["configPatches"][0]["patch"]["value"]  # noqa: E731
    assert value(shipped) == value(chart)
    assert value(shipped)["transport_socket"]["typed_config"]["common_tls_context"][
        "combined_validation_context"]["default_validation_context"]["match_typed_subject_alt_names"] == [
        {"san_type": "URI", "matcher": {"exact": "spiffe://cluster.local/ns/ratelimit/sa/ratelimit"}}]


def test_match_is_server_on_sidecars_only_and_kept_as_given(tmp_path):
    def spec(values):
        return next(d for d in render(tmp_path, values) if d["kind"] == "WasmPlugin")["spec"]
    assert "match" not in spec({})  # a gateway: every listener (Istio's are CLIENT)
    assert spec({"sidecar": True})["match"] == [{"mode": "SERVER"}]
    given = [{"mode": "SERVER", "ports": [{"number": 8080}]}]
    assert spec({"sidecar": True, "match": given})["match"] == given
    for version in SUPPORTED:
        assert validate(version, {"apiVersion": "extensions.istio.io/v1alpha1",
                                  "kind": "WasmPlugin", "metadata": {"name": "x"},
                                  "spec": spec({"sidecar": True})}) == [], version


def test_the_chart_renders_a_traffic_extension_with_the_module_under_wasm(tmp_path):
    fleet = {"config": FLEET, "rateLimitService": {"enabled": True}}
    plain = next(d for d in render(tmp_path, fleet) if d["kind"] == "WasmPlugin")["spec"]
    docs = render(tmp_path, {"api": "TrafficExtension", **fleet})
    te = next(d for d in docs if d["kind"] == "TrafficExtension")
    assert te["apiVersion"] == "extensions.istio.io/v1alpha1"
    assert not [d for d in docs if d["kind"] == "WasmPlugin"]
    spec = te["spec"]
    wasm = spec.pop("wasm")
    # The same fields, only moved: placement, phase and priority in spec,
    # the module, its VM and configuration under wasm.
    assert {k: plain[k] for k in spec} == spec and set(spec) == {"selector", "phase"}
    assert wasm == {k: v for k, v in plain.items() if k not in spec}
    assert wasm["vmConfig"]["env"][0]["valueFrom"] == "HOST"
    proc = helm("template", "rb", str(CHART), "--set", f"image.sha256={DIGEST}",
                "--set", "api=EnvoyFilter", check=False)
    assert proc.returncode != 0 and "WasmPlugin (every Istio line) or TrafficExtension" in proc.stderr

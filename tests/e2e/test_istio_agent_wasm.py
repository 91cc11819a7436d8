"""Istio's Wasm fetch pulls our release (issue 40, outcomes 2 and 4;
docs/istio.md, "Istio's agent fetches the release").

The world of tests/e2e/test_istiod.py (istiod over the chart's output, the
gateway proxy with the bootstrap Istio's code writes), with istio-agent's
module fetch where the agent sits: `istio-helper agent-wasm` on the agent's
socket (the bootstrap unedited), running pkg/wasm's conversion and cache as
the agent's xDS proxy does. The release is pushed to a local registry
(distribution v3, tests/e2e/test_image.py) by scripts/image.sh, and the
chart is rendered with `oci://` urls as a user would:

  - by tag and by digest: the agent pulls it, checks the manifest digest the
    chart pins, and Envoy loads the cached module, byte for byte
    dist/ratebound.wasm; 5 requests pass and the 6th is refused;
  - a wrong digest or an unreachable registry: the agent puts Istio's
    deny-all RBAC filter in the module's place and clients get 403
    "RBAC: access denied" (not a 5xx); the series on-call alerts on are
    read from the agent, Envoy and istiod as Prometheus scrapes them;
  - a pluginConfig the filter refuses: Envoy rejects the push and keeps
    the previous filter, istiod counts the reject for ECDS, and a proxy that
    starts meanwhile answers 500 to every request.

Every process is started here and stopped by its PID; all traffic goes to
127.0.0.1.
"""
from __future__ import annotations

import hashlib
import json
import re
import time
from pathlib import Path

import pytest
import yaml

from harness import ensure_room
from launcher import WASM, free_port
from test_image import VERSION, registry, run  # noqa: F401 - registry is a fixture
from test_prometheus import Prometheus, impatient_rules
from test_istiod import (CONFIG, ECDS_NAME, LINES, ROOT, AgentWasm, GatewayProxy, _connects, _get_through,
                         _samples, _scrape, _wait, bootstrap_override, envs,  # noqa: F401 - a fixture
                         istio_bootstrap, render_chart, start_world, write_atomically)

AGENT_ENV = {"WASM_INSECURE_REGISTRIES": "*"}  # the registry here speaks plain HTTP
WASM_TYPE = "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm"
RBAC_TYPE = "type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC"


@pytest.fixture(scope="module")
def release(registry):  # noqa: F811 - the fixture imported above
    """The release image pushed to the local registry: (repository, digest)."""
    repo = f"{registry}/ratebound"
    out = run(ROOT / "scripts" / "image.sh", "push", f"{repo}:{VERSION}")
    digest = out.stdout.strip()
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", digest), out.stdout
    return repo, digest


def image(url: str, sha256: str) -> dict:
    """The chart's values, as a user writes them: the sha256 of an oci://
    url is the manifest digest without its "sha256:" (the chart refuses
    it with: any other spelling and the agent serves the deny-all filter)."""
    return {"image": {"url": url, "sha256": sha256.removeprefix("sha256:")}}


def metric(text: str, name: str, **labels) -> float | None:
    """The value of one series in a Prometheus text scrape (None: absent)."""
    for line in _samples(text, name):
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


def loaded_filter(proxy: GatewayProxy, istiod, agent) -> dict:
    configs = _wait("an ECDS filter loaded", lambda: proxy.ecds(), 60,
                    procs=[istiod, agent, proxy])
    assert [c["ecds_filter"]["name"] for c in configs] == [ECDS_NAME], configs
    return configs[0]["ecds_filter"]["typed_config"]


def six(port: int) -> list[int]:
    ensure_room(60, 20)
    return [_get_through(port, "/hello")[0] for _ in range(6)]


@pytest.mark.parametrize("by", ["tag", "digest"])
def test_the_agent_pulls_the_release_and_envoy_runs_it(by, release, tmp_path, envs):
    repo, digest = release
    url = f"oci://{repo}:{VERSION}" if by == "tag" else f"oci://{repo}@{digest}"
    istiod, agent, proxy, port, upstream, prom_port = _world(tmp_path, envs, url, digest)
    try:
        wasm = loaded_filter(proxy, istiod, agent)
        # ratebound's stats are there before any request (defined when the
        # module loads): RateboundServingDenyAll's "no ratebound stat".
        assert 'ratebound_allowed{ratebound_instance="istiod",ratebound_route="hello",' \
            'ratebound_bound="per_address"} 0' in _scrape(prom_port)
        assert wasm["@type"] == WASM_TYPE, wasm
        vm = wasm["config"]["vm_config"]
        # The agent rewrote the remote source to its cached file...
        cached = Path(vm["code"]["local"]["filename"])
        assert agent.cache in cached.parents, (cached, agent.cache)
        # ...which is the release's module, byte for byte.
        assert hashlib.sha256(cached.read_bytes()).hexdigest() == \
            hashlib.sha256(WASM.read_bytes()).hexdigest()
        # It stripped the ISTIO_META_* variables istiod sends for it.
        env = (vm.get("environment_variables") or {}).get("key_values", {})
        assert not [k for k in env if k.startswith("ISTIO_META_")], env
        assert six(port) == [200] * 5 + [429]
        assert upstream.hits == 5, upstream.hits
        scrape = agent.metrics()
        assert metric(scrape, "istio_agent_wasm_remote_fetch_count", result="success") == 1, scrape
        assert metric(scrape, "istio_agent_wasm_config_conversion_count", result="success") >= 1
        print(f"\n{by}: {url} -> {cached} ({cached.stat().st_size} bytes), 6th request 429")
    finally:
        upstream.close()


@pytest.mark.parametrize("fault", ["wrong digest", "unreachable registry"])
def test_a_failed_fetch_serves_istios_deny_all_filter(fault, release, tmp_path, envs):
    repo, digest = release
    if fault == "wrong digest":
        url, sha = f"oci://{repo}:{VERSION}", "sha256:" + "0" * 64
    else:
        url, sha = f"oci://127.0.0.1:{free_port()}/ratebound:{VERSION}", digest
    start = time.monotonic()
    istiod, agent, proxy, port, upstream, prom_port = _world(tmp_path, envs, url, sha)
    try:
        rbac = loaded_filter(proxy, istiod, agent)
        took = time.monotonic() - start
        # Istio's deny-all filter (pkg/wasm/convert.go), not the module.
        assert rbac["@type"] == RBAC_TYPE, rbac
        assert rbac.get("rules_stat_prefix") == "wasm-default-deny", rbac
        got = [_get_through(port, "/hello") for _ in range(3)]
        # What a client sees: 403 from Envoy's RBAC filter, never the upstream.
        assert [g[0] for g in got] == [403] * 3, [(g[0], g[2]) for g in got]
        assert got[0][2].strip() == b"RBAC: access denied", got[0][2]
        assert upstream.hits == 0
        result = "checksum_mismatched" if fault == "wrong digest" else "manifest_failure"
        scrape = agent.metrics()
        assert metric(scrape, "istio_agent_wasm_remote_fetch_count", result=result) == 1, scrape
        assert metric(scrape, "istio_agent_wasm_config_conversion_count",
                      result="fetch_failure") == 1, scrape
        # The series RateboundServingDenyAll reads: Envoy's RBAC stat under
        # the deny-all filter's rules_stat_prefix, which Istio's stats
        # matcher drops and the chart's bootstrap override keeps, as
        # Prometheus scrapes it from the proxy.
        want = 'envoy_http_rbac_wasm_default_deny_denied{http_conn_manager_prefix="outbound_127.0.0.1_%d"} 3' % port
        prom = _scrape(prom_port)
        assert want in prom, [ln for ln in prom.splitlines() if "rbac" in ln]
        assert not [ln for ln in prom.splitlines() if ln.startswith("ratebound_")]
        # A real Prometheus scraping the proxy and the agent, with the rules
        # as shipped (but a `for:` of 1 s): the deny-all page and its reason.
        firing = _alerts(tmp_path, [f"127.0.0.1:{prom_port}"],
                         {"agent": [f"127.0.0.1:{agent.metrics_port}"]},
                         {"RateboundServingDenyAll", "RateboundModuleFetchFailing"})
        print(f"\n{fault}: deny-all served {took:.1f}s after start; "
              f"client: 403 {got[0][2]!r}\nEnvoy: {want}\nagent: "
              + "\n".join(ln for ln in scrape.splitlines() if "wasm_" in ln and "result=" in ln)
              + f"\nPrometheus: firing {sorted(firing)}")
    finally:
        upstream.close()


def _world(tmp: Path, envs: list, url: str, sha256: str):
    """istiod (Kubernetes store) over the chart rendered with this image,
    the agent's Wasm fetch, and a gateway proxy started with the chart's
    bootstrap override (as the annotation does): (istiod, agent, proxy,
    gateway port, upstream, the proxy's Prometheus port)."""
    values = image(url, sha256)
    docs = [d for d in yaml.safe_load_all(render_chart(tmp, CONFIG, extra=values)) if d]
    istiod, proxy, port, _, upstream, prom_port = start_world(
        tmp, envs, "1.40", store="kube", chart_values=values, agent_env=AGENT_ENV,
        override_yaml=bootstrap_override(docs), with_prometheus_port=True)
    return istiod, envs[1], proxy, port, upstream, prom_port


# A limit the filter refuses (check: "a limit is a whole number from 1"),
# which neither the chart nor istiod looks into.
REFUSED = {**CONFIG, "routes": [{**CONFIG["routes"][0], "bounds": [
    {**CONFIG["routes"][0]["bounds"][0], "limit": 0}]}]}


def test_a_rejected_push_keeps_the_old_filter_and_a_new_proxy_answers_500(release, tmp_path, envs):
    """A pluginConfig the filter refuses: Envoy rejects the ECDS update and
    keeps running the previous filter (the count goes on) though its config
    dump shows the refused one; istiod counts the reject
    (pilot_total_xds_rejects{type="ecds"}, what RateboundPushRejected reads);
    and a proxy that starts meanwhile (its pod replacing this one) takes the
    refused configuration and answers 500 to every request."""
    repo, digest = release
    url = f"oci://{repo}@{digest}"
    istiod, agent, proxy, port, upstream, _ = _world(tmp_path, envs, url, digest)
    try:
        loaded = loaded_filter(proxy, istiod, agent)
        assert loaded["@type"] == WASM_TYPE
        rejects = lambda: metric(istiod.metrics(), "pilot_total_xds_rejects", type="ecds") or 0
        assert rejects() == 0
        write_atomically(istiod.config_dir / "ratebound.yaml",
                         render_chart(tmp_path, REFUSED, extra=image(url, digest)))
        _wait("istiod counts Envoy's reject", lambda: rejects() >= 1, 30,
              procs=[istiod, agent, proxy])
        # Envoy kept what it had: the same resource, still enforcing.
        # Envoy's config dump shows the refused configuration (on-call
        # reading it sees limit 0)...
        now = proxy.ecds()[0]["ecds_filter"]["typed_config"]
        assert json.loads(now["config"]["configuration"]["value"]) == REFUSED
        # ...while the filter it had goes on enforcing the old one.
        assert six(port) == [200] * 5 + [429]
        assert upstream.hits == 5
        rejected = [ln for ln in proxy.log().splitlines() if "limit" in ln and "rejected" in ln.lower()]
        firing = _alerts(tmp_path, [], {"istiod": [f"127.0.0.1:{istiod.monitoring_port}"]},
                         {"RateboundPushRejected"})
        print(f"\nPrometheus: firing {sorted(firing)}")
        print(f"istiod: pilot_total_xds_rejects{{type=\"ecds\"}} {rejects():g}; Envoy: "
              + (rejected[0][-300:] if rejected else "(no log line)"))

        # A new proxy (a pod replacing this one now) gets the listener and
        # the refused filter configuration.
        proxy.stop()
        late = tmp_path / "late"
        late.mkdir()
        newcomer, newcomer_agent = late_proxy(late, istiod, envs)
        _wait("the new proxy's listener", lambda: _connects(port), 30,
              procs=[istiod, newcomer_agent, newcomer])
        got = [_get_through(port, "/hello") for _ in range(3)]
        # It answers 500 to everything the filter would see, until a push
        # it accepts; nothing reaches the upstream.
        assert [g[0] for g in got] == [500] * 3, [(g[0], g[2][:200]) for g in got]
        assert upstream.hits == 5
        print(f"new proxy: {[(g[0], g[2]) for g in got]}")
    finally:
        upstream.close()


def late_proxy(tmp: Path, istiod, envs: list):
    """A second gateway proxy and its agent, started now in `tmp`: Istio's
    bootstrap for it, with its own admin port (the mesh config gives every
    proxy the same one, each in its own pod)."""
    agent = AgentWasm(tmp, istiod, AGENT_ENV)
    envs.append(agent)
    admin = free_port()
    boot = istio_bootstrap(tmp, istiod, free_port(), free_port(), via_agent=True)
    boot["admin"]["address"]["socket_address"]["port_value"] = admin
    proxy = GatewayProxy(tmp, LINES["1.40"], boot, admin)
    envs.append(proxy)
    return proxy, agent


def _alerts(tmp: Path, envoys: list[str], others: dict, want: set[str]) -> set[str]:
    """Runs Prometheus over these targets with the shipped rules until every
    alert of `want` fires; returns what fires then."""
    prom = Prometheus(tmp, envoys, impatient_rules(tmp), others)
    try:
        return prom.wait(f"{sorted(want)} firing", prom.firing, lambda f: want <= f, timeout=45)
    finally:
        prom.stop()

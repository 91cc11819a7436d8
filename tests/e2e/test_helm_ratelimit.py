"""The Helm chart's rate-limit service (`ratelimit.*`), checked as shipped:
rendered with the pinned helm for a single Redis, a Sentinel and a Cluster
(AUTH from a Secret, TLS with a CA from a Secret), every environment variable
it sets is one the pinned envoyproxy/ratelimit reads (its
src/settings/settings.go, under .tools/), and the real service is started
with the Deployment's environment exactly as rendered (only the pod's
addresses and ports moved to free ports of 127.0.0.1, and its mounts under a
temporary folder) against real Redis processes from Debian's redis-server
package: a master with two sentinels (each with its own password), a
three-node cluster, a TLS-only Redis. With the rendered environment the
service is not ready while its configuration has no domain, ready once the
projected volume holds two domains' ConfigMaps (as `ratebound rls-config
--format configmap` writes them, laid out as the kubelet lays out a
projected volume, updated by its symlink swap), counts both domains in that
Redis, and serves its own metrics in Prometheus' format.

deploy/kubernetes/ratelimit.yaml (the same as plain manifests) is checked
against the chart: its service's environment is the chart's for its Redis.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

import engines
import processes
from harness import free_port
from test_helm import CHART, DIGEST, ROOT, helm

MODULE = ROOT / ".tools" / "gopath" / "pkg" / "mod" / "github.com" / "envoyproxy" / \
    "ratelimit@v1.4.1-0.20260122083618-3fb702589d36"
CLI = ROOT / "dist" / "ratebound"
IMAGE_DIGEST = "sha256:" + "cd" * 32
WAIT = 20.0  # seconds for any process or state

SIGNIN = {"instance": "signin",
          "rate_limit_service": {"cluster": "rls", "domain": "signin"},
          "routes": [{"name": "login", "account": {"header": "x-login"},
                      "bounds": [{"name": "attempts", "per": "account", "scope": "installation",
                                  "limit": 5, "window": "PT1M"}]}]}
API = {"instance": "api",
       "rate_limit_service": {"cluster": "rls", "domain": "api"},
       "routes": [{"name": "all", "bounds": [{"name": "total", "per": "route",
                                               "scope": "installation", "limit": 100,
                                               "window": "PT1H"}]}]}


# --------------------------------------------------------------------------
# Rendering

def render(tmp: Path, ratelimit: dict, check: bool = True) -> list[dict] | subprocess.CompletedProcess:
    values = {"image": {"sha256": DIGEST},
              "ratelimit": {"enabled": True, "image": {"digest": IMAGE_DIGEST}, **ratelimit}}
    proc = helm("template", "rb", str(CHART), "-n", "istio-system", values=values, tmp=tmp,
                check=check)
    if not check:
        return proc
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def deployment(docs: list[dict]) -> dict:
    return next(d for d in docs if d["kind"] == "Deployment")


def container(docs: list[dict]) -> dict:
    return deployment(docs)["spec"]["template"]["spec"]["containers"][0]


def settings_read() -> set[str]:
    """Every variable the pinned service reads (its envconfig tags)."""
    src = MODULE / "src" / "settings" / "settings.go"
    assert src.exists(), f"{src} is missing: run scripts/install-ratelimit.sh"
    return set(re.findall(r'envconfig:"([A-Z0-9_]+)"', src.read_text()))


SENTINEL_VALUES = {"redis": {"type": "sentinel",
                             "sentinel": {"masterSet": "counts",
                                          "addresses": ["s1.redis:26379", "s2.redis:26379"]},
                             "auth": {"secretName": "redis-auth", "key": "password",
                                      "sentinelKey": "sentinel-password"}}}
CLUSTER_VALUES = {"redis": {"type": "cluster",
                            "cluster": {"nodes": ["c0.redis:6379", "c1.redis:6379"]},
                            "auth": {"secretName": "redis-auth"},
                            "tls": {"enabled": True, "caSecret": "redis-ca",
                                    "clientSecret": "redis-client"}}}


def test_every_variable_rendered_is_one_the_pinned_service_reads(tmp_path):
    known = settings_read()
    for values in ({}, SENTINEL_VALUES, CLUSTER_VALUES, {"prometheus": {"enabled": False}}):
        env = container(render(tmp_path, values))["env"]
        names = [e["name"] for e in env]
        assert len(names) == len(set(names)), names
        assert set(names) <= known, set(names) - known
    # The pinned service has both: its metrics for Prometheus, and the
    # readiness that waits for a configuration.
    assert {"USE_PROMETHEUS", "PROMETHEUS_ADDR", "PROMETHEUS_PATH",
            "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "REDIS_SENTINEL_AUTH"} <= known


def env_of(c: dict) -> dict:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c["env"]}


def test_sentinel_and_cluster_render_as_the_service_parses_them(tmp_path):
    s = env_of(container(render(tmp_path, SENTINEL_VALUES)))
    # The master set first, then each sentinel (src/redis/driver_impl.go).
    assert s["REDIS_TYPE"] == "SENTINEL"
    assert s["REDIS_URL"] == "counts,s1.redis:26379,s2.redis:26379"
    assert s["REDIS_AUTH"] == {"secretKeyRef": {"name": "redis-auth", "key": "password"}}
    assert s["REDIS_SENTINEL_AUTH"] == {"secretKeyRef": {"name": "redis-auth",
                                                         "key": "sentinel-password"}}
    assert "REDIS_PIPELINE_WINDOW" not in s and "REDIS_TLS" not in s
    docs = render(tmp_path, CLUSTER_VALUES)
    c = env_of(container(docs))
    assert c["REDIS_TYPE"] == "CLUSTER" and c["REDIS_URL"] == "c0.redis:6379,c1.redis:6379"
    # The service's own word: a cluster needs a write flush window.
    assert c["REDIS_PIPELINE_WINDOW"] == "150us"
    assert c["REDIS_TLS"] == "true"
    mounts = {m["name"]: m["mountPath"] for m in container(docs)["volumeMounts"]}
    assert c["REDIS_TLS_CACERT"] == mounts["redis-ca"] + "/ca.crt"
    assert c["REDIS_TLS_CLIENT_CERT"] == mounts["redis-client"] + "/tls.crt"
    vols = {v["name"]: v for v in deployment(docs)["spec"]["template"]["spec"]["volumes"]}
    assert vols["redis-ca"]["secret"]["secretName"] == "redis-ca"
    assert vols["redis-client"]["secret"]["secretName"] == "redis-client"


def test_replicas_disruption_budget_spread_digest_and_projected_config(tmp_path):
    docs = render(tmp_path, {"configMaps": ["ratelimit-config-signin", "ratelimit-config-api"]})
    kinds = sorted(d["kind"] for d in docs if d["metadata"].get("namespace") == "ratelimit")
    assert kinds == ["Deployment", "PodDisruptionBudget", "Service", "ServiceAccount"], kinds
    dep = deployment(docs)
    pod = dep["spec"]["template"]
    labels = pod["metadata"]["labels"]
    assert dep["spec"]["replicas"] == 2
    assert dep["spec"]["selector"]["matchLabels"] == labels
    pdb = next(d for d in docs if d["kind"] == "PodDisruptionBudget")
    assert pdb["spec"] == {"minAvailable": 1, "selector": {"matchLabels": labels}}
    spread = pod["spec"]["topologySpreadConstraints"]
    assert [t["topologyKey"] for t in spread] == ["topology.kubernetes.io/zone",
                                                  "kubernetes.io/hostname"]
    assert all(t["labelSelector"] == {"matchLabels": labels} for t in spread)
    c = container(docs)
    assert c["image"] == f"docker.io/envoyproxy/ratelimit@{IMAGE_DIGEST}"
    config = next(v for v in pod["spec"]["volumes"] if v["name"] == "config")
    assert config["projected"]["sources"] == [{"configMap": {"name": "ratelimit-config-signin"}},
                                              {"configMap": {"name": "ratelimit-config-api"}}]
    assert {"name": "config", "mountPath": "/data/ratelimit/config",
            "readOnly": True} in c["volumeMounts"]
    svc = next(d for d in docs if d["kind"] == "Service" and d["metadata"]["name"] == "ratelimit")
    assert svc["spec"]["selector"] == labels
    # Metrics and readiness are wired.
    env = env_of(c)
    assert env["USE_PROMETHEUS"] == "true" and env["USE_STATSD"] == "false"
    assert env["HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED"] == "true"
    assert pod["metadata"]["annotations"]["prometheus.io/port"] == "9090"
    assert c["readinessProbe"]["httpGet"] == {"path": "/healthcheck", "port": "http"}
    # The filter's cluster names this Service and its service account.
    off = render(tmp_path, {"podDisruptionBudget": {"enabled": False},
                            "topologySpreadConstraints": [], "image": {"digest": "",
                                                                       "allowTag": True}})
    assert not [d for d in off if d["kind"] == "PodDisruptionBudget"]
    assert "topologySpreadConstraints" not in deployment(off)["spec"]["template"]["spec"]
    assert container(off)["image"] == "docker.io/envoyproxy/ratelimit:3fb70258"


@pytest.mark.parametrize("values, words", [
    ({"image": {"digest": ""}}, "ratelimit.image.digest is required"),
    ({"image": {"digest": "ab" * 32}}, 'is not "sha256:" and 64 lower-case hex digits'),
    ({"redis": {"type": "sentinel"}}, "ratelimit.redis.sentinel.addresses"),
    ({"redis": {"type": "cluster"}}, "ratelimit.redis.cluster.nodes"),
    ({"redis": {"type": "replicated"}}, 'ratelimit.redis.type "replicated": single, sentinel or cluster'),
    ({"redis": {"tls": {"enabled": True}}}, "needs ratelimit.redis.tls.caSecret"),
    ({"configMaps": []}, "ratelimit.configMaps: name at least one ConfigMap"),
])
def test_what_the_chart_refuses_to_render(values, words, tmp_path):
    proc = render(tmp_path, values, check=False)
    assert proc.returncode != 0 and words in proc.stderr, proc.stderr


def test_the_filters_cluster_must_name_the_service_deployed(tmp_path):
    # The defaults agree: the Service ratelimit.ratelimit, its account's identity.
    values = {"image": {"sha256": DIGEST}, "rateLimitService": {"enabled": True},
              "ratelimit": {"enabled": True, "image": {"digest": IMAGE_DIGEST}}}
    helm("template", "rb", str(CHART), values=values, tmp=tmp_path)
    moved = {**values, "ratelimit": {**values["ratelimit"], "namespace": "limits"}}
    proc = helm("template", "rb", str(CHART), values=moved, tmp=tmp_path, check=False)
    assert proc.returncode != 0 and \
        "set it to ratelimit.limits.svc.cluster.local" in proc.stderr, proc.stderr
    moved["rateLimitService"] = {"enabled": True, "address": "ratelimit.limits.svc.cluster.local"}
    proc = helm("template", "rb", str(CHART), values=moved, tmp=tmp_path, check=False)
    assert proc.returncode != 0 and "is not the identity of the service account" in proc.stderr
    moved["rateLimitService"]["identity"] = "spiffe://cluster.local/ns/limits/sa/ratelimit"
    helm("template", "rb", str(CHART), values=moved, tmp=tmp_path)


# --------------------------------------------------------------------------
# deploy/kubernetes/ratelimit.yaml: the same service

def test_the_plain_manifest_runs_the_service_the_chart_renders(tmp_path):
    shipped = [d for d in yaml.safe_load_all((ROOT / "deploy" / "kubernetes" / "ratelimit.yaml")
                                             .read_text()) if d]
    dep = next(d for d in shipped if d["kind"] == "Deployment" and d["metadata"]["name"] == "ratelimit")
    plain = dep["spec"]["template"]["spec"]
    chart = deployment(render(tmp_path, {}))["spec"]["template"]["spec"]
    pc, cc = plain["containers"][0], chart["containers"][0]
    assert pc["env"] == cc["env"]
    for key in ("ports", "readinessProbe", "volumeMounts", "command", "securityContext"):
        assert pc[key] == cc[key], key
    assert plain["volumes"] == chart["volumes"]
    assert pc["image"].startswith("docker.io/envoyproxy/ratelimit")
    assert any(d["kind"] == "PodDisruptionBudget" for d in shipped)
    assert [t["topologyKey"] for t in plain["topologySpreadConstraints"]] == \
        [t["topologyKey"] for t in chart["topologySpreadConstraints"]]
    assert dep["spec"]["replicas"] >= 2
    # Its Redis keeps its counts across a restart: an append-only file on a
    # volume claimed per pod.
    redis = next(d for d in shipped if d["kind"] == "StatefulSet")
    args = redis["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--appendonly") + 1] == "yes"
    assert redis["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "data"


# --------------------------------------------------------------------------
# The real service with the rendered environment

def wait_for(what: str, fn, timeout: float = WAIT, logs=()):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            got = fn()
            if got:
                return got
            last = got
        except Exception as e:  # noqa: BLE001 - the last failure is reported
            last = e
        time.sleep(0.1)
    tails = "\n".join(f"--- {p}\n{engines._tail(p)}" for p in logs)
    raise AssertionError(f"{what}: not within {timeout}s (last: {last!r})\n{tails}")


class RedisProc:
    """One redis-server (or sentinel) on 127.0.0.1, started with `args`."""

    def __init__(self, tmp: Path, name: str, args: list[str], cli_args: list[str],
                 sentinel_conf: str | None = None, tls: bool = False) -> None:
        self.dir = tmp / name
        self.dir.mkdir(parents=True)
        self.log = self.dir / "log"
        self.port = free_port()
        self.cli_args = ["-h", "127.0.0.1", "-p", str(self.port), *cli_args]
        if sentinel_conf is not None:
            conf = self.dir / "sentinel.conf"  # sentinel rewrites its file
            conf.write_text(f"port {self.port}\nbind 127.0.0.1\ndir {self.dir}\n{sentinel_conf}")
            cmd = ["redis-server", str(conf), "--sentinel"]
        else:
            ports = ["--port", "0", "--tls-port", str(self.port)] if tls else ["--port", str(self.port)]
            cmd = ["redis-server", *ports, "--bind", "127.0.0.1",
                   "--save", "", "--appendonly", "no", "--dir", str(self.dir), *args]
        with open(self.log, "ab") as log:
            self.proc = processes.popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, cwd=self.dir)
        wait_for(f"{name} answers PING", lambda: self.cli("PING") == "PONG", logs=[self.log])

    def cli(self, *args: str) -> str:
        out = subprocess.run(["redis-cli", "--no-auth-warning", *self.cli_args, *args],
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip()

    def stop(self) -> None:
        engines._stop(self.proc)


def tls_files(tmp: Path) -> dict[str, Path]:
    """A CA and a certificate for 127.0.0.1 it signed (openssl)."""
    d = tmp / "tls"
    d.mkdir()
    f = {k: d / k for k in ("ca.key", "ca.crt", "redis.key", "redis.csr", "redis.crt", "ext")}
    run = lambda *a: subprocess.run(["openssl", *a], check=True, capture_output=True, timeout=60)  # noqa: E731
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(f["ca.key"]), "-out",
        str(f["ca.crt"]), "-days", "2", "-subj", "/CN=test-ca")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(f["redis.key"]), "-out",
        str(f["redis.csr"]), "-subj", "/CN=redis")
    f["ext"].write_text("subjectAltName=IP:127.0.0.1\n")
    run("x509", "-req", "-in", str(f["redis.csr"]), "-CA", str(f["ca.crt"]), "-CAkey",
        str(f["ca.key"]), "-CAcreateserial", "-out", str(f["redis.crt"]), "-days", "2",
        "-extfile", str(f["ext"]))
    return f


class Projected:
    """A projected volume as the kubelet writes it: the files in a
    timestamped folder, `..data` a symlink to it, each key a symlink through
    `..data`; an update writes a new folder and swaps `..data` atomically."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True)
        self.n = 0
        self.write({})

    def write(self, files: dict[str, str]) -> None:
        self.n += 1
        stamp = self.path / f"..2026_12_07_00_00_0{self.n}.000000000"
        stamp.mkdir()
        for k, v in files.items():
            (stamp / k).write_text(v)
        tmp = self.path / "..data_tmp"
        tmp.symlink_to(stamp.name)
        os.replace(tmp, self.path / "..data")
        for k in files:
            link = self.path / k
            if not link.is_symlink():
                link.symlink_to(f"..data/{k}")


def configmaps_of(*configs: dict, tmp: Path) -> list[dict]:
    """`ratebound rls-config --format configmap` for several configurations."""
    import json

    paths = []
    for i, c in enumerate(configs):
        p = tmp / f"filter{i}.json"
        p.write_text(json.dumps(c))
        paths.append(str(p))
    assert CLI.exists(), f"{CLI} is missing: run ./build.sh"
    out = subprocess.run([str(CLI), "rls-config", "--format", "configmap", *paths],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


class Pod:
    """The rendered container as a process: its env as rendered, values
    from `secrets` for each secretKeyRef, each mount under `root`; the
    pod's listening addresses moved to free ports of 127.0.0.1."""

    def __init__(self, docs: list[dict], secrets: dict[str, dict[str, str]],
                 tmp: Path) -> None:
        spec = deployment(docs)["spec"]["template"]["spec"]
        c = spec["containers"][0]
        self.root = tmp / "pod"
        self.rendered = {}
        for e in c["env"]:
            if "value" in e:
                self.rendered[e["name"]] = e["value"]
            else:
                ref = e["valueFrom"]["secretKeyRef"]
                self.rendered[e["name"]] = secrets[ref["name"]][ref["key"]]
        vols = {v["name"]: v for v in spec["volumes"]}
        self.mounts = {m["mountPath"]: vols[m["name"]] for m in c["volumeMounts"]}
        self.config: Projected | None = None
        for path, vol in self.mounts.items():
            where = self.root / path.lstrip("/")
            if "projected" in vol:
                self.config = Projected(where)
            else:
                where.mkdir(parents=True)
                secret = secrets[vol["secret"]["secretName"]]
                items = vol["secret"].get("items") or [{"key": k, "path": k} for k in secret]
                for it in items:
                    (where / it["path"]).write_text(secret[it["key"]])
        self.port, self.grpc_port, self.metrics_port = free_port(), free_port(), free_port()
        self.debug_port = free_port()
        self.log = tmp / "ratelimit.log"
        self.proc = None

    def env(self) -> dict[str, str]:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        for k, v in self.rendered.items():
            # A path into a mount (or above one) is the same path under root.
            if v.startswith("/") and any(m == v or m.startswith(v + "/") or v.startswith(m + "/")
                                         for m in self.mounts):
                v = str(self.root / v.lstrip("/"))
            env[k] = v
        # The pod's network: its ports here, on 127.0.0.1 only.
        assert self.rendered["PORT"] == "8080" and self.rendered["GRPC_PORT"] == "8081"
        assert self.rendered.get("PROMETHEUS_ADDR", ":9090") == ":9090"
        env.update({"HOST": "127.0.0.1", "PORT": str(self.port),
                    "GRPC_HOST": "127.0.0.1", "GRPC_PORT": str(self.grpc_port),
                    "DEBUG_HOST": "127.0.0.1", "DEBUG_PORT": str(self.debug_port)})
        if "PROMETHEUS_ADDR" in env:
            env["PROMETHEUS_ADDR"] = f"127.0.0.1:{self.metrics_port}"
        return env

    def start(self) -> None:
        assert engines.SERVICE_CMD.exists(), f"{engines.SERVICE_CMD}: {engines.INSTALL_HINT}"
        with open(self.log, "ab") as log:
            self.proc = processes.popen([str(engines.SERVICE_CMD)], env=self.env(),
                                        cwd=self.root, stdout=log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL)

    def health(self) -> int | None:
        if self.proc.poll() is not None:
            raise AssertionError(f"the service exited with {self.proc.returncode}:\n"
                                 f"{engines._tail(self.log)}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthcheck",
                                        timeout=1) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code
        except OSError:
            return None

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics",
                                    timeout=2) as r:
            return r.read().decode()

    def stop(self) -> None:
        engines._stop(self.proc)


def serve_two_domains(pod: Pod, tmp: Path, count) -> None:
    """Not ready on an empty configuration; ready on two domains' ConfigMaps
    (one each); both counted; metrics served. `count(key_fragment)` reads
    the counter from the Redis under test."""
    pod.start()
    try:
        # The folder exists but holds no domain: the service runs, and says
        # it is not ready (500), because of HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED.
        assert wait_for("the health check answers", lambda: pod.health(), logs=[pod.log]) == 500
        maps = configmaps_of(SIGNIN, API, tmp=tmp)
        assert [m["metadata"]["name"] for m in maps] == ["ratelimit-config-signin",
                                                         "ratelimit-config-api"]
        files = {k: v for m in maps for k, v in m["data"].items()}
        assert set(files) == {"signin.yaml", "api.yaml"}
        pod.config.write(files)
        wait_for("ready once both domains' maps are projected", lambda: pod.health() == 200,
                 logs=[pod.log])
        with engines.RlsClient(pod.grpc_port) as rls:
            for domain, entries, limit in (
                    ("signin", [("bound", "login.attempts"), ("account", "a1")], 5),
                    ("api", [("bound", "all.total")], 100)):
                for _ in range(2):
                    # No override: the limit is the one in that domain's ConfigMap.
                    r = rls.should_rate_limit(domain, [engines.descriptor(*entries)])
                assert r["overall"] == engines.OK, (domain, r)
                assert (r["statuses"][0]["limit"], r["statuses"][0]["remaining"]) == \
                    (limit, limit - 2), (domain, r)
        assert count("signin_bound_login.attempts_account_a1_") == 2
        assert count("api_bound_all.total_") == 2
        # Its own metrics, once its stats are flushed (every 10 s by default):
        # the four calls, and each domain's hits.
        def calls() -> str | None:
            text = pod.metrics()
            m = re.search(r'^ratelimit_service_total_requests\{grpc_method="ShouldRateLimit"\} (\S+)$',
                          text, re.M)
            return text if m and float(m.group(1)) == 4 else None

        text = wait_for("the service's metrics count the 4 calls", calls, timeout=25, logs=[pod.log])
        for domain in ("signin", "api"):
            assert re.search(rf'^ratelimit_service_rate_limit_total_hits\{{domain="{domain}",[^}}]*\}} 2$',
                             text, re.M), text[-3000:]
    finally:
        pod.stop()


def sum_of(nodes: list[RedisProc], fragment: str) -> int:
    total = 0
    for n in nodes:
        for key in filter(None, n.cli("--scan", "--pattern", f"*{fragment}*").splitlines()):
            total += int(n.cli("GET", key) or 0)
    return total


def test_the_rendered_service_runs_against_a_real_sentinel(tmp_path):
    password, sentinel_password = "counts-secret", "sentinel-secret"
    master = RedisProc(tmp_path, "master", ["--requirepass", password, "--masterauth", password],
                       ["-a", password])
    sentinels = []
    try:
        for i in range(2):
            sentinels.append(RedisProc(
                tmp_path, f"sentinel{i}", [], ["-a", sentinel_password],
                sentinel_conf=(f"sentinel monitor counts 127.0.0.1 {master.port} 1\n"
                               f"sentinel auth-pass counts {password}\n"
                               f"requirepass {sentinel_password}\n")))
        for s in sentinels:
            wait_for("the sentinel knows the master", lambda: s.cli(
                "SENTINEL", "get-master-addr-by-name", "counts").split() ==
                ["127.0.0.1", str(master.port)], logs=[s.log])
        docs = render(tmp_path, {"redis": {
            "type": "sentinel",
            "sentinel": {"masterSet": "counts",
                         "addresses": [f"127.0.0.1:{s.port}" for s in sentinels]},
            "auth": {"secretName": "redis-auth", "key": "password",
                     "sentinelKey": "sentinel-password"}}})
        pod = Pod(docs, {"redis-auth": {"password": password,
                                        "sentinel-password": sentinel_password}}, tmp_path)
        assert pod.rendered["REDIS_URL"] == f"counts,127.0.0.1:{sentinels[0].port},127.0.0.1:{sentinels[1].port}"
        serve_two_domains(pod, tmp_path, lambda f: sum_of([master], f))
    finally:
        for p in [*sentinels, master]:
            p.stop()


def test_the_rendered_service_runs_against_a_real_cluster(tmp_path):
    password = "cluster-secret"
    nodes = []
    try:
        for i in range(3):
            nodes.append(RedisProc(tmp_path, f"node{i}", [
                "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                "--requirepass", password, "--masterauth", password], ["-a", password]))
        create = subprocess.run(
            ["redis-cli", "--no-auth-warning", "-a", password, "--cluster", "create",
             *[f"127.0.0.1:{n.port}" for n in nodes], "--cluster-replicas", "0", "--cluster-yes"],
            capture_output=True, text=True, timeout=60)
        assert create.returncode == 0, create.stdout + create.stderr
        for n in nodes:
            wait_for("the cluster is up", lambda: "cluster_state:ok" in n.cli("CLUSTER", "INFO"),
                     logs=[n.log])
        # Seeds: two of the three nodes; the service finds the third.
        docs = render(tmp_path, {"redis": {
            "type": "cluster", "cluster": {"nodes": [f"127.0.0.1:{n.port}" for n in nodes[:2]]},
            "auth": {"secretName": "redis-auth"}}})
        pod = Pod(docs, {"redis-auth": {"password": password}}, tmp_path)
        assert pod.rendered["REDIS_TYPE"] == "CLUSTER"
        serve_two_domains(pod, tmp_path, lambda f: sum_of(nodes, f))
    finally:
        for n in nodes:
            n.stop()


def test_the_rendered_service_runs_against_a_real_tls_redis(tmp_path):
    f = tls_files(tmp_path)
    # TLS only (no plain port), the server's certificate for 127.0.0.1.
    redis = RedisProc(tmp_path, "redis-tls", ["--tls-cert-file", str(f["redis.crt"]),
                                        "--tls-key-file", str(f["redis.key"]),
                                        "--tls-ca-cert-file", str(f["ca.crt"]),
                                        "--tls-auth-clients", "no"],
                      ["--tls", "--cacert", str(f["ca.crt"])], tls=True)
    try:
        docs = render(tmp_path, {"redis": {"type": "single", "address": f"127.0.0.1:{redis.port}",
                                           "tls": {"enabled": True, "caSecret": "redis-ca"}}})
        # The CA comes from the Secret, mounted where REDIS_TLS_CACERT says.
        pod = Pod(docs, {"redis-ca": {"ca.crt": f["ca.crt"].read_text()}}, tmp_path)
        assert pod.rendered["REDIS_TLS"] == "true"
        assert Path(pod.env()["REDIS_TLS_CACERT"]).read_text() == f["ca.crt"].read_text()
        serve_two_domains(pod, tmp_path, lambda frag: sum_of([redis], frag))
    finally:
        redis.stop()

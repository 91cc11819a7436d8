"""The OCI image Istio pulls (`url: oci://...`), for real: a local registry
(distribution v3) on 127.0.0.1, the image pushed by scripts/image.sh (oras),
pulled back by two other clients — crane (go-containerregistry, the library
Istio's Wasm image fetcher is built on) and plain HTTP GETs that follow
istio pkg/wasm/imagefetcher.go's rules for the compat variant — and the
module inside compared byte for byte with dist/ratebound.wasm. The rendered
WasmPlugin must carry the MANIFEST digest Istio compares (not the module's
own hash), and an https:// url keeps the module's hash.

Tools: .tools/bin/{oras,crane,registry}, from scripts/install-oci-tools.sh
(./test.sh runs it). Nothing is skipped: a missing tool fails.
"""
from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import subprocess
import tarfile
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

import processes
from launcher import free_port

ROOT = Path(__file__).resolve().parents[2]
TOOLS = Path(os.environ.get("RATEBOUND_TOOLS", ROOT / ".tools")) / "bin"
WASM = ROOT / "dist" / "ratebound.wasm"
LAYOUT = ROOT / "dist" / "oci"
VERSION = re.search(r'^version\s*=\s*"([^"]+)"', (ROOT / "Cargo.toml").read_text(), re.M).group(1)

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"


def tool(name: str) -> str:
    path = TOOLS / name
    assert path.exists(), f"{path} is missing: run scripts/install-oci-tools.sh"
    return str(path)


def run(*args, env=None, check=True, timeout=120) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})}, cwd=ROOT)
    if check:
        assert proc.returncode == 0, f"{args}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    """A distribution v3 registry on 127.0.0.1 (filesystem storage in a temp dir)."""
    binary = tool("registry")
    tmp = tmp_path_factory.mktemp("registry")
    port = free_port()
    config = tmp / "config.yml"
    config.write_text(json.dumps({  # JSON is YAML
        "version": 0.1,
        "log": {"level": "warn"},
        "storage": {"filesystem": {"rootdirectory": str(tmp / "data")},
                    "delete": {"enabled": True}},
        "http": {"addr": f"127.0.0.1:{port}"},
    }))
    log = open(tmp / "registry.log", "w")
    proc = processes.popen([binary, "serve", str(config)], stdout=log, stderr=subprocess.STDOUT,
                           env={**os.environ, "OTEL_TRACES_EXPORTER": "none"})
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{base}/v2/", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert proc.poll() is None, (tmp / "registry.log").read_text()
            assert time.monotonic() < deadline, "registry did not answer /v2/ in 30 s"
            time.sleep(0.2)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()


@pytest.fixture(scope="module")
def built():
    assert WASM.exists(), f"{WASM} is missing: run ./build.sh first"
    assert (LAYOUT / "digest").exists(), f"{LAYOUT} is missing: run ./build.sh first"
    digest = (LAYOUT / "digest").read_text().strip()
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", digest), digest
    return digest


@pytest.fixture(scope="module")
def pushed(registry, built):
    ref = f"{registry}/ratebound:{VERSION}"
    out = run(ROOT / "scripts" / "image.sh", "push", ref)
    assert out.stdout.strip() == built, out
    return ref


def http_get(url: str, accept: str | None = None) -> tuple[bytes, dict]:
    req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.read(), dict(r.headers)


def istio_compat_extract(manifest: dict, layer_blob: bytes) -> bytes:
    """The compat variant as istio's extractOCIStandardImage reads it: an OCI
    manifest whose single layer is application/vnd.oci.image.layer.v1.tar+gzip,
    a gzipped tar holding a file whose base name is plugin.wasm."""
    assert manifest["mediaType"] == OCI_MANIFEST
    assert len(manifest["layers"]) == 1, "older Istio fetchers want exactly one layer"
    assert manifest["layers"][0]["mediaType"] == OCI_LAYER
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(layer_blob))) as tar:
        for member in tar.getmembers():
            if os.path.basename(member.name) == "plugin.wasm":
                return tar.extractfile(member).read()
    raise AssertionError("plugin.wasm not in the layer")


def test_registry_round_trip_with_plain_http(pushed, built):
    """What Istio's fetcher does, step by step, with no OCI library."""
    host, _, rest = pushed.partition("/")
    repo, _, tag = rest.partition(":")
    body, headers = http_get(f"http://{host}/v2/{repo}/manifests/{tag}", OCI_MANIFEST)
    # The digest Istio compares with `sha256` is this: sha256 of the manifest bytes.
    assert "sha256:" + hashlib.sha256(body).hexdigest() == built
    assert headers.get("Docker-Content-Digest") == built
    manifest = json.loads(body)
    layer = manifest["layers"][0]
    blob, _ = http_get(f"http://{host}/v2/{repo}/blobs/{layer['digest']}")
    assert "sha256:" + hashlib.sha256(blob).hexdigest() == layer["digest"]
    module = istio_compat_extract(manifest, blob)
    assert module == WASM.read_bytes()
    assert module[:4] == b"\0asm"  # Istio's isValidWasmBinary
    # Pulling by digest (url: oci://...@sha256:<digest>) answers the same manifest.
    again, _ = http_get(f"http://{host}/v2/{repo}/manifests/{built}", OCI_MANIFEST)
    assert again == body


def test_crane_pulls_the_same_image(pushed, built, tmp_path):
    """crane is go-containerregistry, the library Istio's fetcher uses."""
    crane = tool("crane")
    assert run(crane, "digest", "--insecure", pushed).stdout.strip() == built
    manifest = json.loads(run(crane, "manifest", "--insecure", pushed).stdout)
    assert [l["mediaType"] for l in manifest["layers"]] == [OCI_LAYER]
    # Layer digests, sizes and the config's diff_ids all check out.
    run(crane, "validate", "--insecure", "--remote", pushed)
    out = tmp_path / "fs.tar"
    by_digest = pushed.rsplit(":", 1)[0] + "@" + built
    run(crane, "export", "--insecure", by_digest, out)
    with tarfile.open(out) as tar:
        names = tar.getnames()
        assert names == ["plugin.wasm"], names
        assert tar.extractfile("plugin.wasm").read() == WASM.read_bytes()


def test_rendered_wasmplugins_pin_the_manifest_digest(pushed, built):
    """build.sh's dist/istio: `sha256` is the manifest digest Istio compares
    for oci:// urls, not the hash of the .wasm file."""
    rendered = sorted((ROOT / "dist" / "istio").glob("*.yaml"))
    plugins = [d for f in rendered for d in yaml.safe_load_all(f.read_text())
               if d and d.get("kind") == "WasmPlugin"]
    assert len(plugins) >= 2, rendered
    module_hash = hashlib.sha256(WASM.read_bytes()).hexdigest()
    for doc in plugins:
        spec = doc["spec"]
        assert spec["url"].startswith("oci://"), spec["url"]
        assert spec["sha256"] == built.removeprefix("sha256:"), doc["metadata"]["name"]
        assert spec["sha256"] != module_hash
    print(f"\nimage {pushed}: manifest {built}; WasmPlugin sha256 {plugins[0]['spec']['sha256']}; "
          f"module sha256 {module_hash}")


def test_the_image_is_reproducible(built, tmp_path):
    """The same module always gives the same manifest digest, so the digest
    rendered at build time is the one a later push answers."""
    out = run(ROOT / "scripts" / "image.sh", "build", env={"OCI_LAYOUT": str(tmp_path / "oci")})
    assert out.stdout.strip() == built


def test_https_url_keeps_the_module_hash(tmp_path):
    url = "https://artifacts.example.com/ratebound.wasm"
    run(ROOT / "scripts" / "istio-manifests.sh", tmp_path / "istio",
        env={"RATEBOUND_URL": url, "OCI_LAYOUT": str(tmp_path / "oci")})
    assert not (tmp_path / "oci").exists(), "an https url builds no image"
    doc = yaml.safe_load((tmp_path / "istio" / "wasmplugin.yaml").read_text())
    assert doc["spec"]["url"] == url
    assert doc["spec"]["sha256"] == hashlib.sha256(WASM.read_bytes()).hexdigest()


def test_a_url_pinned_to_another_image_is_refused(built, tmp_path):
    env = {"OCI_LAYOUT": str(tmp_path / "oci")}
    wrong = "oci://registry.example.com/ratebound@sha256:" + "0" * 64
    out = run(ROOT / "scripts" / "istio-manifests.sh", tmp_path / "a",
              env={**env, "RATEBOUND_URL": wrong}, check=False)
    assert out.returncode != 0 and "pinned to another image" in out.stderr, out
    right = "oci://registry.example.com/ratebound@" + built
    run(ROOT / "scripts" / "istio-manifests.sh", tmp_path / "b", env={**env, "RATEBOUND_URL": right})
    doc = yaml.safe_load((tmp_path / "b" / "wasmplugin.yaml").read_text())
    assert doc["spec"]["url"] == right and doc["spec"]["sha256"] == built.removeprefix("sha256:")


def test_tools_are_the_pinned_versions():
    pins = (ROOT / "scripts" / "install-oci-tools.sh").read_text()
    oras = run(tool("oras"), "version").stdout
    assert re.search(r"Version:\s+1\.3\.6", oras), oras
    assert "oras@v1.3.6" in pins
    assert run(tool("crane"), "version").stdout.strip() == "v0.22.1"
    assert "crane@v0.22.1" in pins
    registry = run(tool("registry"), "--version").stdout
    assert " v3.1.2" in registry, registry
    assert "registry@v3.1.2" in pins

"""scripts/release.sh against a local registry (distribution v3 on
127.0.0.1, test_image's fixture), then installing from what it left: the
image pulled back by the digest the rendered WasmPlugin pins, its module run
in a real Envoy with that WasmPlugin's pluginConfig, the chart rendered from
the release's archive, the CLI and schema, the SBOM, the checksums. Run
twice, the release is the same bytes."""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import subprocess
import tarfile
from pathlib import Path

import pytest
import yaml

from harness import addr, ensure_room, request
from test_image import OCI_MANIFEST, VERSION, http_get, istio_compat_extract, registry  # noqa: F401
from test_istio_crd import SUPPORTED, validate

ROOT = Path(__file__).resolve().parents[2]
HELM = Path(os.environ.get("RATEBOUND_TOOLS", ROOT / ".tools")) / "bin" / "helm"
P = f"ratebound-{VERSION}"
FILES = {f"{P}.wasm", f"{P}-x86_64-linux", f"{P}.schema.json", f"{P}-oci.tar",
         f"{P}-istio.yaml", f"{P}-chart.tgz", f"{P}-rls.yaml", f"{P}.cdx.json",
         "RELEASE-NOTES.md", "SHA256SUMS"}


# Two whole releases happen in the fixture, each running ./build.sh (module,
# the console's browser core, CLI): after ./test.sh's build the first has
# nothing to compile and the second only the module, but on a tree changed
# since, the first compiles it all (the CLI alone takes minutes):
# more than the suite's 300 s per test.
pytestmark = pytest.mark.timeout(1800)


def release(registry_ref: str, out: Path, version: str = VERSION) -> subprocess.CompletedProcess:
    # The suite runs on working trees with changes; the notes then say so.
    return subprocess.run(
        [str(ROOT / "scripts" / "release.sh"), version, "--registry", registry_ref,
         "--out", str(out)],
        capture_output=True, text=True, timeout=900, cwd=ROOT,
        env={**os.environ, "RELEASE_ALLOW_DIRTY": "1"})


@pytest.fixture(scope="module")
def released(registry, tmp_path_factory):  # noqa: F811 - the fixture imported above
    base = tmp_path_factory.mktemp("release")
    ref = f"{registry}/ratebound"
    first, again = base / "first", base / "second"
    released_to(ref, first)
    # The module (the bytes Istio pins) is compiled again from the same
    # sources for the second; the CLI is reused (relinking it takes minutes).
    subprocess.run(["cargo", "clean", "-q", "-p", "ratebound", "--target", "wasm32-wasip1",
                    "--profile", "wasm"], check=True, cwd=ROOT, timeout=120)
    released_to(ref, again)
    print((first / "SHA256SUMS").read_text())
    return {"registry": registry, "ref": ref, "dir": first, "again": again}


def released_to(ref: str, out: Path) -> None:
    proc = release(ref, out)
    assert proc.returncode == 0, f"release.sh: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def plugins(rel: Path) -> list[dict]:
    docs = [d for d in yaml.safe_load_all((rel / f"{P}-istio.yaml").read_text()) if d]
    return [d for d in docs if d["kind"] == "WasmPlugin"]


def test_the_release_holds_the_files_and_their_checksums(released):
    rel = released["dir"]
    assert {p.name for p in rel.iterdir()} == FILES
    sums = dict(reversed(line.split("  ", 1)) for line in (rel / "SHA256SUMS").read_text().splitlines())
    assert set(sums) == FILES - {"SHA256SUMS"}
    for name, digest in sums.items():
        assert sha256(rel / name) == digest, name
    assert os.access(rel / f"{P}-x86_64-linux", os.X_OK)


def test_a_second_release_of_the_same_commit_is_the_same_bytes(released):
    """The same commit released twice gives the same files: the module
    compiled again gives the same bytes, and the packing is deterministic
    (tar metadata, gzip, SBOM, notes, the image). The CLI is not compiled
    again for the second release, so its bytes are not shown to repeat."""
    assert (released["dir"] / "SHA256SUMS").read_text() == (released["again"] / "SHA256SUMS").read_text()


def test_the_registry_serves_the_image_the_manifests_pin(released):
    rel, reg = released["dir"], released["registry"]
    docs = plugins(rel)
    assert len(docs) >= 5
    digest = docs[0]["spec"]["sha256"]
    for doc in docs:
        assert doc["spec"]["url"] == f"oci://{released['ref']}:{VERSION}", doc["metadata"]["name"]
        assert doc["spec"]["sha256"] == digest
        for version in SUPPORTED:
            assert validate(version, doc) == [], (version, doc["metadata"]["name"])
    # What Istio's fetcher does: the manifest by its digest, then the layer.
    body, _ = http_get(f"http://{reg}/v2/ratebound/manifests/sha256:{digest}", OCI_MANIFEST)
    assert hashlib.sha256(body).hexdigest() == digest
    manifest = json.loads(body)
    layer, _ = http_get(f"http://{reg}/v2/ratebound/blobs/{manifest['layers'][0]['digest']}")
    assert istio_compat_extract(manifest, layer) == (rel / f"{P}.wasm").read_bytes()
    notes = (rel / "RELEASE-NOTES.md").read_text()
    assert f"## [{VERSION}]" in notes and f"sha256:{digest}" in notes


def test_the_oci_layout_archive_is_the_pushed_image(released, tmp_path):
    rel = released["dir"]
    digest = plugins(rel)[0]["spec"]["sha256"]
    with tarfile.open(rel / f"{P}-oci.tar") as tar:
        tar.extractall(tmp_path, filter="data")
    index = json.loads((tmp_path / "index.json").read_text())
    assert [m["digest"] for m in index["manifests"]] == [f"sha256:{digest}"]
    blob = tmp_path / "blobs" / "sha256" / digest
    assert sha256(blob) == digest


def test_the_released_module_limits_in_a_real_envoy(released, envoy, tmp_path):
    """Installed from the result: the module Istio would fetch (pulled from
    the registry by the pinned digest), configured with the released
    WasmPlugin's pluginConfig."""
    rel, reg = released["dir"], released["registry"]
    doc = next(d for d in plugins(rel) if d["metadata"]["name"] == "ratebound")
    digest = doc["spec"]["sha256"]
    body, _ = http_get(f"http://{reg}/v2/ratebound/manifests/sha256:{digest}", OCI_MANIFEST)
    manifest = json.loads(body)
    layer, _ = http_get(f"http://{reg}/v2/ratebound/blobs/{manifest['layers'][0]['digest']}")
    module = tmp_path / "plugin.wasm"
    module.write_bytes(istio_compat_extract(manifest, layer))
    config = doc["spec"]["pluginConfig"]
    assert config["routes"][0]["bounds"][0]["limit"] == 5
    e = envoy(config, wasm=module)
    ensure_room(60, 10)
    src = addr(3, base=95)
    statuses = [request(e.port, "/hello", src=src)[0] for _ in range(6)]
    assert statuses == [200] * 5 + [429], statuses


def test_the_released_chart_renders_with_the_release_image(released, tmp_path):
    rel = released["dir"]
    assert HELM.exists(), f"{HELM} is missing: run scripts/install-helm.sh"
    out = subprocess.run([str(HELM), "template", "rb", str(rel / f"{P}-chart.tgz"), "-n", "istio-system"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    docs = [d for d in yaml.safe_load_all(out.stdout) if d]
    plugin = next(d for d in docs if d["kind"] == "WasmPlugin")
    released_plugin = plugins(rel)[0]
    assert plugin["spec"]["url"] == released_plugin["spec"]["url"]
    assert plugin["spec"]["sha256"] == released_plugin["spec"]["sha256"]
    assert plugin["metadata"]["labels"]["app.kubernetes.io/version"] == VERSION
    for doc in docs:
        if doc["kind"] != "ConfigMap":
            for version in SUPPORTED:
                assert validate(version, doc) == [], (version, doc["kind"])


def test_the_released_cli_and_schema(released):
    rel = released["dir"]
    cli = str(rel / f"{P}-x86_64-linux")
    version = subprocess.run([cli, "--version"], capture_output=True, text=True, timeout=30).stdout
    assert f"ratebound {VERSION} (git " in version, version
    schema = subprocess.run([cli, "schema"], capture_output=True, text=True, timeout=30).stdout
    assert json.loads(schema) == json.loads((rel / f"{P}.schema.json").read_text())
    assert json.loads(schema)["$id"] == "urn:ratebound:filter-config:v1"
    # The rate-limit service manifest's configuration is what rls-config says.
    docs = [d for d in yaml.safe_load_all((rel / f"{P}-rls.yaml").read_text()) if d]
    cm = next(d for d in docs if d["kind"] == "ConfigMap")
    rls = subprocess.run([cli, "rls-config", str(ROOT / "envoy-demo" / "ratebound-installation.json")],
                         capture_output=True, text=True, timeout=30).stdout
    assert yaml.safe_load(cm["data"]["signin.yaml"]) == yaml.safe_load(rls)


def test_the_sbom_names_the_module_and_cli_crates(released):
    bom = json.loads((released["dir"] / f"{P}.cdx.json").read_text())
    assert bom["bomFormat"] == "CycloneDX" and bom["metadata"]["component"]["version"] == VERSION
    by_name = {c["name"]: c for c in bom["components"]}
    builds = {n: {p["value"] for p in c["properties"]} for n, c in by_name.items()}
    assert "module" in builds["proxy-wasm"] and "cli" not in builds["proxy-wasm"]
    assert builds["clap"] == {"cli"}
    lock = (ROOT / "Cargo.lock").read_text()
    for c in by_name.values():
        assert c["purl"] == f"pkg:cargo/{c['name']}@{c['version']}"
        assert c["hashes"][0]["content"] in lock, c["name"]


def test_a_version_that_is_not_the_crates_is_refused(registry, tmp_path):  # noqa: F811
    proc = release(f"{registry}/ratebound", tmp_path / "x", version="9.9.9")
    assert proc.returncode == 1 and "is not the crate's version" in proc.stderr, proc.stderr
    assert not (tmp_path / "x").exists()
    usage = subprocess.run([str(ROOT / "scripts" / "release.sh"), VERSION],
                           capture_output=True, text=True, timeout=30)
    assert usage.returncode == 2 and "usage:" in usage.stderr

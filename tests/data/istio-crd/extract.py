#!/usr/bin/env python3
"""Extracts the openAPIV3Schema of the Istio kinds ratebound ships manifests
for, from istio/api's published CRD file, into tests/data/istio-crd/<version>/.

    tests/data/istio-crd/extract.py v1.26.4 v1.27.8 v1.32.0

Each version is fetched with `go mod download -json istio.io/api@<version>`
(the Go module proxy; the module holds
kubernetes/customresourcedefinitions.gen.yaml, the file istio's Helm chart
installs as its CRDs). Needs go and PyYAML. The output is JSON, one file per
kind, with the served API versions and the SHA-256 of the CRD file it came
from, so the test needs no YAML library for the schemas.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
# The kinds whose manifests the repository ships or its docs show.
KINDS = ["WasmPlugin", "RequestAuthentication", "AuthorizationPolicy", "EnvoyFilter"]


def module_dir(version: str) -> Path:
    tools = Path(os.environ.get("RATEBOUND_TOOLS", ROOT / ".tools"))
    env = dict(os.environ, GOPATH=str(tools / "gopath"), GOCACHE=str(tools / "gocache"),
               GOFLAGS="-modcacherw")
    out = subprocess.run(["go", "mod", "download", "-json", f"istio.io/api@{version}"],
                         env=env, capture_output=True, text=True, timeout=300)
    info = json.loads(out.stdout)
    if "Error" in info or "Dir" not in info:
        sys.exit(f"extract: istio.io/api@{version}: {info.get('Error', out.stderr)}")
    return Path(info["Dir"])


def extract(version: str) -> None:
    crd_file = module_dir(version) / "kubernetes" / "customresourcedefinitions.gen.yaml"
    raw = crd_file.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    out_dir = HERE / version
    out_dir.mkdir(exist_ok=True)
    found = set()
    for doc in yaml.safe_load_all(raw):
        if not doc or doc.get("kind") != "CustomResourceDefinition":
            continue
        spec = doc["spec"]
        kind = spec["names"]["kind"]
        if kind not in KINDS:
            continue
        found.add(kind)
        versions = {}
        for v in spec["versions"]:
            versions[v["name"]] = {
                "served": v.get("served", False),
                "storage": v.get("storage", False),
                "openAPIV3Schema": v["schema"]["openAPIV3Schema"],
            }
        record = {
            "source": f"istio.io/api@{version} kubernetes/customresourcedefinitions.gen.yaml",
            "source_sha256": digest,
            "group": spec["group"],
            "kind": kind,
            "versions": versions,
        }
        path = out_dir / f"{spec['names']['plural']}.{spec['group']}.json"
        path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
        print(f"extract: {path.relative_to(ROOT)} ({', '.join(versions)})")
    missing = set(KINDS) - found
    if missing:
        sys.exit(f"extract: {version}: no CRD for {sorted(missing)}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for v in sys.argv[1:]:
        extract(v)

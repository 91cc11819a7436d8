#!/usr/bin/env python3
"""A CycloneDX 1.5 SBOM (JSON) of what the module and the CLI are built from:
the crates `cargo tree` resolves for each build (the module:
`-p ratebound-filter --target wasm32-wasip1`; the CLI: `-p ratebound-cli`
on x86_64-unknown-linux-gnu), normal dependencies only,
each with its version, license, purl and the crates.io SHA-256 from
Cargo.lock.

    scripts/sbom.py VERSION OUT.json

Deterministic: components sorted, the timestamp is SOURCE_DATE_EPOCH
(default 0), the serial number is derived from the content.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

BUILDS = {
    "module": ["-p", "ratebound-filter", "--target", "wasm32-wasip1"],
    "cli": ["-p", "ratebound-cli", "--target", "x86_64-unknown-linux-gnu"],
}


def tree(args: list[str]) -> dict[tuple[str, str], dict]:
    out = subprocess.run(
        ["cargo", "tree", "--locked", "-e", "normal", "--prefix", "none",
         "--format", "{p}\t{l}\t{r}", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=True).stdout
    found = {}
    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) < 2:
            continue
        # "{p}" is "name vX.Y.Z" plus " (path)" for local crates and " (*)" for repeats.
        m = re.match(r"(\S+) v(\S+)", parts[0])
        if not m:
            continue
        found[(m.group(1), m.group(2))] = {"license": parts[1].strip(),
                                           "local": "(/" in parts[0]}
    return found


def lock_checksums() -> dict[tuple[str, str], str]:
    sums, name, ver = {}, None, None
    for line in (ROOT / "Cargo.lock").read_text().splitlines():
        if line == "[[package]]":
            name = ver = None
        elif line.startswith("name = "):
            name = line.split('"')[1]
        elif line.startswith("version = ") and name:
            ver = line.split('"')[1]
        elif line.startswith("checksum = ") and name and ver:
            sums[(name, ver)] = line.split('"')[1]
    return sums


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    version, out = sys.argv[1], Path(sys.argv[2])
    sums = lock_checksums()
    used: dict[tuple[str, str], dict] = {}
    for build, args in BUILDS.items():
        for key, info in tree(args).items():
            entry = used.setdefault(key, {**info, "builds": set()})
            entry["builds"].add(build)
    components = []
    for (name, ver), info in sorted(used.items()):
        # The workspace's own crates are the application, not its components.
        if name in ("ratebound", "ratebound-filter", "ratebound-cli"):
            continue
        comp = {
            "type": "library",
            "bom-ref": f"pkg:cargo/{name}@{ver}",
            "name": name,
            "version": ver,
            "purl": f"pkg:cargo/{name}@{ver}",
            "properties": [{"name": "ratebound:build", "value": b}
                           for b in sorted(info["builds"])],
        }
        if info["license"]:
            comp["licenses"] = [{"expression": info["license"]}]
        if (name, ver) in sums:
            comp["hashes"] = [{"alg": "SHA-256", "content": sums[(name, ver)]}]
        components.append(comp)
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "0"))
    bom = {
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "version": 1,
        "metadata": {
            "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch)),
            "component": {"type": "application", "bom-ref": f"pkg:cargo/ratebound@{version}",
                          "name": "ratebound", "version": version,
                          "purl": f"pkg:cargo/ratebound@{version}",
                          "licenses": [{"expression": "Apache-2.0"}]},
        },
        "components": components,
        "dependencies": [],
    }
    body = json.dumps(bom, sort_keys=True).encode()
    bom["serialNumber"] = f"urn:uuid:{uuid.UUID(hashlib.sha256(body).hexdigest()[:32])}"
    out.write_text(json.dumps(bom, indent=1, sort_keys=True) + "\n")
    print(f"sbom: {out} ({len(components)} crates)")


if __name__ == "__main__":
    main()

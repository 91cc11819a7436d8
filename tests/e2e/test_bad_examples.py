"""Every configuration in filter-config/bad/ (which `ratebound check` must
refuse) is refused by the filter itself when pushed to a running Envoy, and
the configuration in force keeps serving with its counts."""
import json
from pathlib import Path

import jsonschema

from harness import ROOT, addr, request

BAD = sorted((ROOT / "filter-config" / "bad").glob("*.json"))

GOOD = {
    "instance": "bad",
    "routes": [
        {"name": "r", "match": {"route_name": "direct"},
         "bounds": [{"name": "per_address", "per": "address", "limit": 50, "window": "P1D"}]},
    ],
}


def test_every_bad_example_is_refused_by_the_filter_in_envoy(envoy):
    assert len(BAD) >= 20, BAD
    e = envoy(GOOD)
    src = addr(5, base=93)
    accepted = []
    remaining = []
    for path in BAD:
        text = path.read_text()
        if e.reload(text) != "rejected":
            accepted.append(path.name)
            e.reload(GOOD)  # back to a configuration that counts
            continue
        status, h, _ = request(e.port, "/", src=src)
        assert status == 200 and h["ratelimit-limit"] == "50", (path.name, h)
        remaining.append(int(h["ratelimit-remaining"]))
    print(f"{len(BAD)} bad configurations pushed; accepted: {accepted}")
    assert accepted == []
    # One count, never reset by a refused push.
    assert remaining == list(range(49, 49 - len(BAD), -1)), remaining


def test_the_schema_ships_beside_the_module_and_knows_the_bad_examples():
    """build.sh leaves the schema of the build in dist/, the same as the
    committed one; it refuses the bad examples the filter refuses."""
    shipped = ROOT / "dist" / "ratebound.schema.json"
    assert shipped.read_text() == (ROOT / "filter-config" / "ratebound.schema.json").read_text()
    schema = json.loads(shipped.read_text())
    assert schema["$id"] == "urn:ratebound:filter-config:v1"
    validator = jsonschema.Draft202012Validator(schema)
    assert [f.name for f in BAD if validator.is_valid(json.loads(f.read_text()))] == []
    good = sorted((ROOT / "filter-config" / "examples").glob("*.json"))
    assert good and [f.name for f in good if not validator.is_valid(json.loads(f.read_text()))] == []

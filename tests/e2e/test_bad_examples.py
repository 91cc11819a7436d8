"""Every configuration in filter-config/bad/ (which `ratebound check` must
refuse) is refused by the filter itself when pushed to a running Envoy, and
the configuration in force keeps serving with its counts."""
import json
from pathlib import Path

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

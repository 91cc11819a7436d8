"""`ratebound diff OLD NEW` says what a real Envoy does on the push: each
bound it says keeps goes on counting, each it says resets or adds starts from
zero (test_reload's pushes, each diffed first with the built CLI)."""
from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path

from harness import ensure_room
from test_reload import lr, two_routes

CLI = Path(__file__).resolve().parents[2] / "dist" / "ratebound"


def diff(tmp: Path, old: dict, new: dict) -> tuple[int, dict[str, str], str]:
    (tmp / "old.json").write_text(json.dumps(old))
    (tmp / "new.json").write_text(json.dumps(new))
    js = subprocess.run([str(CLI), "diff", str(tmp / "old.json"), str(tmp / "new.json"),
                         "--format", "json"], capture_output=True, text=True, timeout=30)
    text = subprocess.run([str(CLI), "diff", str(tmp / "old.json"), str(tmp / "new.json")],
                          capture_output=True, text=True, timeout=30)
    assert js.returncode == text.returncode, (js, text)
    doc = json.loads(js.stdout)
    return js.returncode, {f"{c['route']}/{c['bound']}": c["verdict"] for c in doc["changes"]}, text.stdout


def test_diff_says_what_the_push_does(envoy, tmp_path):
    old = two_routes()
    e = envoy(old)
    ensure_room(60, 20)
    assert [lr(e, "/a") for _ in range(3)][-1] == (100, 97)
    assert [lr(e, "/b") for _ in range(5)][-1] == (100, 95)

    # b edited: diff says b resets (exit 1), a keeps; the Envoy agrees.
    new = two_routes(limit_b=200)
    rc, verdicts, text = diff(tmp_path, old, new)
    print(text)
    assert (rc, verdicts) == (1, {"a/per_route": "keeps", "b/per_route": "resets"})
    assert "resets b/per_route (node, 100 per PT1M → 200 per PT1M)\n         limit 100 → 200\n" in text
    assert e.reload(new) == "success"
    assert (lr(e, "/a"), lr(e, "/b")) == ((100, 96), (200, 199))

    # A route added: nothing lost (exit 0), c new.
    old, new = new, copy.deepcopy(new)
    new["routes"].append({"name": "c", "match": {"route_name": "direct", "path_prefix": "/c"},
                          "bounds": [{"name": "per_route", "per": "route", "limit": 7, "window": "PT1M"}]})
    rc, verdicts, text = diff(tmp_path, old, new)
    print(text)
    assert (rc, verdicts) == (0, {"a/per_route": "keeps", "b/per_route": "keeps", "c/per_route": "adds"})
    assert text.endswith("0 reset, 0 dropped, 1 added, 2 kept\n")
    assert e.reload(new) == "success"
    assert (lr(e, "/a"), lr(e, "/b"), lr(e, "/c")) == ((100, 95), (200, 198), (7, 6))

    # a's match changed and c dropped: a resets, c drops, b keeps.
    old, new = new, copy.deepcopy(new)
    new["routes"][0]["match"]["path_prefix"] = "/a/"
    del new["routes"][2]
    rc, verdicts, text = diff(tmp_path, old, new)
    print(text)
    assert (rc, verdicts) == (1, {"a/per_route": "resets", "b/per_route": "keeps", "c/per_route": "drops"})
    assert "the route's match changed" in text
    assert e.reload(new) == "success"
    assert (lr(e, "/a/x"), lr(e, "/b")) == ((100, 99), (200, 197))


def test_an_invalid_file_is_a_usage_error_not_lost_counts(tmp_path):
    (tmp_path / "ok.json").write_text(json.dumps(two_routes()))
    (tmp_path / "bad.json").write_text('{"routes": [')
    p = subprocess.run([str(CLI), "diff", str(tmp_path / "ok.json"), str(tmp_path / "bad.json")],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2, p

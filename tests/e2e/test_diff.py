"""`ratebound diff OLD NEW` says what a real Envoy does on the push: each
bound it says keeps goes on counting, each it says resets or adds starts from
zero (test_reload's pushes, each diffed first with the built CLI); and what
re-keys callers without touching a lane (a client-address prefix, an
identity source), an instance rename and a new module, each pushed."""
from __future__ import annotations

import copy
import hashlib
import json
import re
import shutil
import subprocess
from pathlib import Path

from harness import ensure_room, request
from launcher import WASM
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


def keyed() -> dict:
    """A bound per address, one per user (from a trusted header; callers
    without it are counted by address) and one per route: PT1H, so that one
    clock window holds the whole test."""
    def route(name: str, per: str) -> dict:
        return {"name": name, "match": {"route_name": "direct", "path_prefix": f"/{name}"},
                "bounds": [{"name": f"per_{per}", "per": per, "limit": 100, "window": "PT1H"}]}
    return {"instance": "rk", "identity": {"header": {"user": "x-user"}},
            "routes": [route("addr", "address"), route("user", "user"), route("all", "route")]}


# Both headers on every named request: which one names the user is the
# configuration's choice.
NAMED = {"x-user": "alice", "x-account": "alice@acct"}


def left(e, path: str, headers: dict | None = None) -> int:
    """One request; what its bound has left (RateLimit-Remaining)."""
    status, h, body = request(e.port, path, headers=headers)
    assert status == 200, (status, h, body)
    return int(h["ratelimit-remaining"])


def counts(e) -> dict[str, int]:
    """One more request to each bound (the user bound twice: a named
    caller and an anonymous one); what each has left."""
    return {"addr": left(e, "/addr"), "user": left(e, "/user", NAMED),
            "anon": left(e, "/user"), "all": left(e, "/all")}


def vms_created(e) -> int:
    """Wasm VMs Envoy created so far (`wasm.…created`, whatever the runtime)."""
    return sum(v for k, v in e.stats(r"^wasm\..*\.created$").items())


def plugin(path: Path, config: dict, wasm: Path) -> str:
    """A WasmPlugin loading `wasm` with `config`, written to `path`."""
    sha = hashlib.sha256(wasm.read_bytes()).hexdigest()
    path.write_text(json.dumps({
        "apiVersion": "extensions.istio.io/v1alpha1", "kind": "WasmPlugin",
        "metadata": {"name": "rb", "namespace": "istio-system"},
        "spec": {"url": f"file://{wasm}", "sha256": sha, "pluginConfig": config}}))
    return str(path)


def test_what_rekeys_callers_renames_or_reloads_is_said_and_is_what_envoy_does(envoy, tmp_path):
    old = keyed()
    e = envoy(old)
    ensure_room(3600, 40)
    for _ in range(3):
        before = counts(e)
    assert before == {"addr": 97, "user": 97, "anon": 97, "all": 97}

    # A /24 for IPv4: every address caller restarts, and so does the user
    # bound's anonymous caller (counted by address); a named user keeps.
    new = copy.deepcopy(old)
    new["client_address"] = {"ipv4_prefix": 24}
    rc, verdicts, text = diff(tmp_path, old, new)
    print(text)
    assert (rc, verdicts) == (1, {"addr/per_address": "resets", "user/per_user": "resets",
                                  "all/per_route": "keeps"})
    assert "client_address.ipv4_prefix 32 → 24: every IPv4 caller's count restarts" in text
    assert "callers counted by their IPv4 network (those without a user) restart" in text
    assert e.reload(new) == "success"
    assert counts(e) == {"addr": 99, "user": 96, "anon": 99, "all": 96}

    # The user from another header: each user restarts (alice is another
    # text there); the address and route bounds keep.
    old, new = new, copy.deepcopy(new)
    new["identity"]["header"]["user"] = "x-account"
    rc, verdicts, text = diff(tmp_path, old, new)
    print(text)
    assert (rc, verdicts) == (1, {"addr/per_address": "keeps", "user/per_user": "resets",
                                  "all/per_route": "keeps"})
    assert "the user now comes from header x-account (was header x-user)" in text
    assert e.reload(new) == "success"
    assert counts(e) == {"addr": 98, "user": 99, "anon": 98, "all": 95}

    # A new instance: every node bound restarts.
    old, new = new, copy.deepcopy(new)
    new["instance"] = "rk2"
    rc, verdicts, text = diff(tmp_path, old, new)
    print(text)
    assert (rc, set(verdicts.values())) == (1, {"resets"})
    assert "the instance changed (rk → rk2)" in text
    assert e.reload(new) == "success"
    assert counts(e) == {"addr": 99, "user": 99, "anon": 99, "all": 99}

    # A new module (the same code with one more custom section: another
    # sha256): diff says so, nothing lost (exit 0); Envoy starts a new VM
    # and every count goes on in shared data.
    module = tmp_path / "ratebound-next.wasm"
    shutil.copyfile(WASM, module)
    payload = b"\x0brb-e2e-diff"  # a custom section: its name's length, its name
    with module.open("ab") as f:
        f.write(b"\x00" + bytes([len(payload)]) + payload)
    a = plugin(tmp_path / "old.yaml", new, WASM)
    b = plugin(tmp_path / "new.yaml", new, module)
    p = subprocess.run([str(CLI), "diff", a, b], capture_output=True, text=True, timeout=30)
    print(p.stdout)
    assert p.returncode == 0, p
    assert re.search(r"\nmodule: the module changes \(sha256 [0-9a-f]{64} → [0-9a-f]{64}\): "
                     r"Envoy loads it in a new VM", p.stdout), p.stdout
    assert p.stdout.endswith("0 reset, 0 dropped, 0 added, 3 kept\n"), p.stdout
    vms = vms_created(e)
    e.wasm = module
    assert e.reload(new) == "success"
    assert counts(e) == {"addr": 98, "user": 98, "anon": 98, "all": 98}
    assert vms_created(e) > vms, "the new module did not get a new VM: this step proves nothing"

"""`ratebound top`: a running Envoy's refusals as rates, from its admin
endpoint, through the real CLI (dist/ratebound, built by ./build.sh)."""
import json
import os
import shutil
import subprocess
import threading
import time

import pytest

import processes
from harness import ROOT, burst, ensure_room, request

CLI = ROOT / "dist" / "ratebound"

CFG = {"instance": "topdemo", "routes": [
    {"name": "hello", "match": {"path_prefix": "/hello"}, "bounds": [
        {"name": "per_address", "per": "address", "limit": 3, "window": "PT1M"},
        {"name": "whole", "per": "route", "limit": 1000000, "window": "PT1M"},
    ]},
    {"name": "quiet", "match": {"path_prefix": "/quiet"}, "bounds": [
        {"name": "dry", "per": "address", "limit": 1, "window": "PT1M", "shadow": True},
    ]},
]}


def top(admin_port: int, *args: str, timeout: float = 30.0) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(CLI), "top", "--admin", f"http://127.0.0.1:{admin_port}", *args],
        capture_output=True, text=True, timeout=timeout)


def test_top_once_shows_what_is_refused_now_with_rates(envoy):
    assert CLI.exists(), f"{CLI} is missing: run ./build.sh first"
    e = envoy(CFG)
    ensure_room(60, 25)
    # Before: 3 admitted, then refusals; the shadow bound would refuse.
    assert burst(e.port, 5, 1, path="/hello").count(429) == 2
    for _ in range(3):
        request(e.port, "/quiet")

    # Refuse steadily while top samples: ~40 refusals a second for ~3 s.
    stop = threading.Event()
    sent = {"n": 0}

    def load():
        while not stop.is_set():
            sent["n"] += burst(e.port, 20, 4, path="/hello").count(429)
            time.sleep(0.5)

    t = threading.Thread(target=load)
    t.start()
    try:
        time.sleep(1.2)  # the counters reach Envoy on the module's 1 s tick
        r = top(e.admin_port, "--once", "--format", "json", "--interval", "2")
    finally:
        stop.set()
        t.join()
    assert r.returncode == 0, r.stderr
    view = json.loads(r.stdout)
    print(json.dumps(view, indent=1)[:3000])
    rows = {(b["instance"], b["route"], b["bound"]): b for b in view["bounds"]}
    assert set(rows) == {("topdemo", "hello", "per_address"), ("topdemo", "hello", "whole"),
                         ("topdemo", "quiet", "dry")}
    first = view["bounds"][0]
    assert (first["route"], first["bound"]) == ("hello", "per_address"), "most refusing first"
    # Plausible: the load refuses ~40 a second (20 every ~0.5 s); the stats
    # are at most a second late, over a 2 s interval.
    assert 5 <= first["refused"]["per_s"] <= 200, first
    assert first["refused"]["total"] >= 2 + 20
    assert first["allowed"]["total"] == 3
    assert first["tracked"] == 1 and view["tracked_cap"] == 10000
    assert first["overflow"]["total"] == 0
    assert rows[("topdemo", "hello", "whole")]["refused"]["total"] == 0
    dry = rows[("topdemo", "quiet", "dry")]
    assert dry["would_refuse"]["total"] == 2 and dry["refused"]["total"] == 0
    inst = {i["instance"]: i for i in view["instances"]}["topdemo"]
    assert inst["stats"]["store_errors"]["total"] == 0
    assert inst["stats"]["identity_errors"]["total"] == 0

    # The same as text, for people and scripts that grep.
    r = top(e.admin_port, "--once", "--interval", "1")
    assert r.returncode == 0, r.stderr
    print(r.stdout)
    lines = r.stdout.splitlines()
    assert lines[1].split()[:3] == ["INSTANCE", "ROUTE", "BOUND"], r.stdout
    assert lines[2].split()[:3] == ["topdemo", "hello", "per_address"], r.stdout
    assert "1/10,000" in lines[2], r.stdout
    assert "instance topdemo: store_errors 0" in r.stdout


def test_top_without_an_envoy_is_an_error_not_a_hang(envoy):
    assert CLI.exists(), f"{CLI} is missing: run ./build.sh first"
    r = top(1, "--once", "--interval", "0.1", timeout=20)
    assert r.returncode == 2
    assert "cannot reach the Envoy admin" in r.stderr


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_top_refreshes_in_place_in_a_terminal(envoy):
    assert CLI.exists(), f"{CLI} is missing: run ./build.sh first"
    e = envoy(CFG)
    ensure_room(60, 20)
    burst(e.port, 6, 1, path="/hello")
    session = f"rbtop{os.getpid()}"

    def kill_session():
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True, timeout=10)

    # tmux's server is no child of ours: a stopped run kills the session by name.
    hook = processes.on_stop(kill_session)
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "160", "-y", "20",
                    f"{CLI} top --admin http://127.0.0.1:{e.admin_port} --interval 1"],
                   check=True)
    try:
        def screen() -> str:
            return subprocess.run(["tmux", "capture-pane", "-p", "-t", session],
                                  capture_output=True, text=True).stdout

        deadline = time.time() + 15
        while "per_address" not in screen() and time.time() < deadline:
            time.sleep(0.3)
        first = screen()
        assert any(l.split()[:3] == ["topdemo", "hello", "per_address"]
                   for l in first.splitlines()), first
        assert "(q to quit)" in first, first
        # More refusals: the same screen, refreshed in place, shows them.
        burst(e.port, 30, 4, path="/hello")
        deadline = time.time() + 15
        while time.time() < deadline:
            now = screen()
            if " 33 " in now or "  33" in now:
                break
            time.sleep(0.3)
        print(now)
        row = next(l for l in now.splitlines() if "per_address" in l)
        assert row.split()[6] == "33", now  # REFUSED so far: 3 + 30
        assert now.count("ratebound top:") == 1, "redrawn, not scrolled"
        subprocess.run(["tmux", "send-keys", "-t", session, "q"], check=True)
        deadline = time.time() + 5
        while time.time() < deadline:
            gone = subprocess.run(["tmux", "has-session", "-t", session], capture_output=True)
            if gone.returncode != 0:
                break
            time.sleep(0.2)
        assert gone.returncode != 0, "q ends top (and its session)"
    finally:
        processes.forget(hook)
        kill_session()

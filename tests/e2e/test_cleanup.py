"""A stopped run stops what it started (tests/e2e/processes.py).

Each test runs a pytest of its own, with this folder's conftest.py as its
plugin, on a tiny test that starts a real Envoy (the launcher), a Redis (the
`redis` fixture) and a shell that forks a `sleep`, writes their PIDs down and
sleeps. That pytest is then stopped the way a CI timeout (SIGTERM), a Ctrl-C
(SIGINT) or the kernel (SIGKILL) stops one, and every PID must be gone
within a bounded time.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

INNER = '''
import json, os, subprocess, time

import processes
from launcher import Envoy


def test_starts_then_sleeps(tmp_path, redis):
    # Envoy without the filter: the process is the one the suite runs.
    envoy = Envoy(tmp_path / "envoy", None, http_filters=[]).start()
    # A process that forks: its child is reached through the group only.
    shell = processes.popen(["bash", "-c", "sleep 600 & echo $!; wait"],
                            stdout=subprocess.PIPE, text=True)
    grandchild = int(shell.stdout.readline())
    pids = {"envoy": envoy.pid, "redis": redis.proc.pid, "shell": shell.pid,
            "grandchild": grandchild}
    tmp = os.environ["PIDS_FILE"] + ".tmp"
    with open(tmp, "w") as f:
        json.dump(pids, f)
    os.rename(tmp, os.environ["PIDS_FILE"])
    time.sleep(120)
'''


def _gone(pid: int) -> bool:
    # Not our children: absent, or a zombie not yet reaped by init.
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return True
    return stat.rpartition(b")")[2].split()[0] in (b"Z", b"X")


def _run_and_stop(tmp_path: Path, sig: int) -> tuple[dict[str, int], int, str]:
    """Start the inner pytest, wait for its PIDs, send `sig`; the PIDs, its
    exit status and its output."""
    (tmp_path / "test_inner.py").write_text(INNER)
    pids_file = tmp_path / "pids.json"
    out_path = tmp_path / "inner.out"
    env = {**os.environ, "PIDS_FILE": str(pids_file),
           "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    with open(out_path, "wb") as out:
        # Its own session: a signal reaches that pytest alone, not our group.
        inner = subprocess.Popen(
            [sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider",
             "-q", "-s", str(tmp_path / "test_inner.py")],
            cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True)
    pids: dict[str, int] = {}
    try:
        deadline = time.monotonic() + 30
        while not pids_file.exists():
            assert inner.poll() is None, out_path.read_text(errors="replace")
            assert time.monotonic() < deadline, "the inner test started nothing in 30 s"
            time.sleep(0.1)
        pids = json.loads(pids_file.read_text())
        assert not any(_gone(p) for p in pids.values()), pids
        inner.send_signal(sig)
        code = inner.wait(timeout=20)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not all(_gone(p) for p in pids.values()):
            time.sleep(0.1)
        return pids, code, out_path.read_text(errors="replace")
    finally:
        # Whatever a failed run left behind: the PIDs it wrote down.
        if inner.poll() is None:
            inner.kill()
            inner.wait(10)
        for p in pids.values():
            if not _gone(p):
                os.kill(p, signal.SIGKILL)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stopped_run_stops_every_process_it_started(tmp_path, sig):
    pids, code, out = _run_and_stop(tmp_path, sig)
    left = {name: pid for name, pid in pids.items() if not _gone(pid)}
    assert not left, f"still running after {sig.name}: {left}\n{out}"
    # Stopped by the handler, which then interrupts the run: pytest reports
    # an interrupted session (exit 2), not a death by the signal.
    assert code == 2, out
    assert f"{sig.name}: stopped" in out, out


def test_a_killed_run_takes_its_direct_children_along(tmp_path):
    # SIGKILL runs no handler: the parent-death signal set at start does it.
    # It reaches the processes pytest started, not what they forked.
    pids, code, out = _run_and_stop(tmp_path, signal.SIGKILL)
    assert code == -signal.SIGKILL, out
    left = {name: pid for name, pid in pids.items()
            if name != "grandchild" and not _gone(pid)}
    assert not left, f"still running after SIGKILL: {left}\n{out}"

"""Every process the tests start, so that a run that is stopped stops them.

A terminated pytest (a CI timeout's SIGTERM, Ctrl-C) used to leave its
Envoys, Redis and services running. Every starter (launcher.py, engines.py,
console_app.py, test_istiod.Proc, test_prometheus.Prometheus, test_image's
registry, tests/oracle's readers and MariaDB) calls `popen` instead of
subprocess.Popen:

- the process runs in its own session, so its process group holds what it
  forks, and a stop signals the group (unless the caller passes
  start_new_session=False: then the PID alone);
- it is registered until its owner reaps it; `stop_all()` sends SIGTERM to
  each one still running, SIGKILL after a grace, by PID or group, never by
  name;
- on Linux, started from the main thread, it gets PR_SET_PDEATHSIG=SIGKILL,
  so it dies with pytest even when pytest cannot run a handler (SIGKILL,
  pytest-timeout's `thread` method, which calls os._exit). The kernel
  signals only that process, not what it forked; and only for the main
  thread, because the death signal follows the thread that forked (a child
  of a pool thread would die when the thread ends).

`install()` (conftest.py, tests/oracle/conftest.py) makes SIGTERM and SIGINT
stop them all and then end the run as an interruption (a KeyboardInterrupt,
so fixtures and `finally` blocks still run and pytest reports what ran),
and registers stop_all with atexit. `on_stop(fn)` registers a cleanup that
is no process of ours (tmux's session, say) for the same moments.

Found by `sys.path` insertion of tests/e2e, as launcher.py is.
"""
from __future__ import annotations

import atexit
import ctypes
import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Callable

GRACE_S = 5.0  # between SIGTERM and SIGKILL, as launcher.STOP_TIMEOUT

_PR_SET_PDEATHSIG = 1


def _load_prctl():
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


# Looked up now: the child of a fork should run as little Python as it can.
_prctl = _load_prctl()


@dataclass
class _Entry:
    proc: subprocess.Popen
    group: bool  # the process leads its own group (start_new_session)


_lock = threading.Lock()
_entries: list[_Entry] = []
_hooks: dict[int, Callable[[], None]] = {}
_hook_ids = itertools.count()
_stopping = False


def _die_with(parent: int) -> Callable[[], None]:
    def preexec() -> None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl ran
            os.kill(os.getpid(), signal.SIGKILL)
    return preexec


def popen(args, **kw) -> subprocess.Popen:
    """subprocess.Popen(args, **kw), registered: in its own session unless
    kw says start_new_session=False, with the parent-death signal when it
    can (see the module's docstring)."""
    kw.setdefault("start_new_session", True)
    if _prctl is not None and "preexec_fn" not in kw \
            and threading.current_thread() is threading.main_thread():
        kw["preexec_fn"] = _die_with(os.getpid())
    proc = subprocess.Popen(args, **kw)
    register(proc, group=bool(kw["start_new_session"]))
    return proc


def register(proc: subprocess.Popen, group: bool = False) -> subprocess.Popen:
    """Register a process started elsewhere (group: it leads its own group)."""
    with _lock:
        # Those their owner has reaped are done with: keep the list short.
        _entries[:] = [e for e in _entries if e.proc.returncode is None]
        _entries.append(_Entry(proc, group))
    return proc


def on_stop(fn: Callable[[], None]) -> int:
    """Run fn() when the run is stopped (or at exit) unless forget(token)."""
    with _lock:
        token = next(_hook_ids)
        _hooks[token] = fn
    return token


def forget(token: int) -> None:
    with _lock:
        _hooks.pop(token, None)


def started() -> list[int]:
    """The PIDs registered and not yet reaped by their owners."""
    with _lock:
        return [e.proc.pid for e in _entries if e.proc.returncode is None]


def _gone(pid: int) -> bool:
    """Exited (a zombie counts) or absent. Read from /proc without reaping:
    an unreaped PID cannot be reused, so the group kill that may follow
    cannot reach a stranger."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return True
    state = stat.rpartition(b")")[2].split()[0]
    return state in (b"Z", b"X")


def _signal(e: _Entry, sig: int) -> None:
    try:
        if e.group:
            os.killpg(e.proc.pid, sig)
        else:
            os.kill(e.proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop_all(grace: float = GRACE_S) -> list[int]:
    """SIGTERM every registered process still running (its group if it
    leads one), SIGKILL what is left after `grace` seconds. Returns the PIDs
    signalled. Never waits on a Popen: a signal handler may run while the
    interrupted code holds that Popen's wait lock."""
    with _lock:
        live = [e for e in _entries if e.proc.returncode is None]
        hooks = list(_hooks.values())
        _hooks.clear()
    for fn in hooks:
        try:
            fn()
        except Exception:  # noqa: BLE001 - one failed cleanup must not stop the rest
            pass
    live = [e for e in live if not _gone(e.proc.pid) or e.group]
    for e in live:
        _signal(e, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and not all(_gone(e.proc.pid) for e in live):
        time.sleep(0.05)
    for e in live:
        # A group is killed even when its leader has exited: what it forked
        # may have ignored SIGTERM.
        if e.group or not _gone(e.proc.pid):
            _signal(e, signal.SIGKILL)
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline and not all(_gone(e.proc.pid) for e in live):
        time.sleep(0.02)
    return [e.proc.pid for e in live]


class Terminated(KeyboardInterrupt):
    """Raised by the SIGTERM handler: pytest ends the run as interrupted,
    running teardown, as it does on Ctrl-C."""


def _on_signal(signum, frame) -> None:  # noqa: ARG001
    global _stopping
    if _stopping:  # a second signal while the first one's stop runs
        return
    _stopping = True
    try:
        pids = stop_all()
    finally:
        _stopping = False
    name = signal.Signals(signum).name
    print(f"\n{name}: stopped {len(pids)} started process(es): {pids}",
          file=sys.stderr, flush=True)
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Terminated(name)


def install() -> None:
    """From the main thread (pytest_configure): SIGTERM and SIGINT stop every
    started process, then interrupt the run; atexit stops what is left."""
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    atexit.register(stop_all)

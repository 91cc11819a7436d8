"""Fixtures for the end-to-end tests: real Envoys loading dist/ratebound.wasm."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import processes  # noqa: E402
from harness import WASM, Envoy, Upstream, raise_fd_limit  # noqa: E402


def pytest_configure(config):
    raise_fd_limit(65536)
    # A run stopped by SIGTERM (a CI timeout) or Ctrl-C stops every Envoy,
    # Redis and service it started first (tests/e2e/processes.py).
    processes.install()


def pytest_report_header(config):
    # Which Envoy line ran (RATEBOUND_ENVOY selects another than .venv's).
    import subprocess

    from launcher import envoy_binary

    path = envoy_binary()
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True,
                             timeout=30).stdout.strip()
    except OSError as e:
        out = f"does not run: {e}"
    return f"envoy: {path}: {out}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


@pytest.fixture
def upstream():
    up = Upstream()
    yield up
    up.close()


@pytest.fixture
def envoy_factory(request, tmp_path):
    """envoy_factory(filter_config, **kw) -> a started Envoy (stopped at teardown).

    kw: concurrency=2, xff_num_trusted_hops=0, upstream_port=None, wasm=..., start=True.
    On a failed test every Envoy's log is printed.
    """
    # A missing module fails every test loudly; nothing is skipped.
    assert WASM.exists(), f"{WASM} is missing: run ./build.sh first"
    started: list[Envoy] = []

    def make(filter_config, *, start: bool = True, cls=Envoy, **kw) -> Envoy:
        env = cls(tmp_path / f"envoy{len(started)}", filter_config,
                  name=f"e2e{len(started)}", **kw)
        started.append(env)
        if start:
            env.start()
        return env

    yield make

    failed = any(
        getattr(request.node, "rep_" + when, None) is not None
        and getattr(request.node, "rep_" + when).failed
        for when in ("setup", "call")
    )
    for env in started:
        env.stop()
    if failed:
        for env in started:
            text = env.log()
            # drop Envoy's start-up inventory (extension and header-map listings)
            lines = [l for l in text.splitlines()
                     if "server.cc:467]" not in l and "server.cc:547]" not in l]
            tail = "\n".join(lines[-300:])
            print(f"\n===== Envoy log ({env.log_path}, last {min(300, len(lines))} "
                  f"of {len(lines)} lines, exit {env.exit_code}) =====\n{tail}\n"
                  "===== end of Envoy log =====", flush=True)


@pytest.fixture
def envoy(envoy_factory):
    """Factory alias, for readability in tests."""
    return envoy_factory


def _failed(request) -> bool:
    return any(
        getattr(request.node, "rep_" + when, None) is not None
        and getattr(request.node, "rep_" + when).failed
        for when in ("setup", "call")
    )


@pytest.fixture
def redis(request, tmp_path):
    """A real redis-server on 127.0.0.1 (engines.Redis), stopped at teardown;
    its log is printed on a failed test."""
    from engines import Redis

    r = Redis(tmp_path)
    yield r
    r.stop()
    if _failed(request):
        print(f"\n===== redis log ({r.log_path}) =====\n{r.log()}\n===== end =====",
              flush=True)


@pytest.fixture
def rate_limit_service(request, redis, tmp_path):
    """rate_limit_service(config_yaml, **kw) -> a started envoyproxy/ratelimit
    over `redis` (engines.RateLimitService), stopped at teardown; its log is
    printed on a failed test."""
    from engines import RateLimitService

    started = []

    def make(config_yaml: str, **kw):
        svc = RateLimitService(redis, config_yaml, tmp_path / f"rls{len(started)}", **kw)
        started.append(svc)
        return svc

    yield make
    for svc in started:
        svc.stop()
    if _failed(request):
        for svc in started:
            print(f"\n===== ratelimit log ({svc.log_path}) =====\n{svc.log()}\n===== end =====",
                  flush=True)

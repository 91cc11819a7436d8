"""Fixtures of the account oracle: the real readers (each installed by its
own install.sh, idempotent) and the filter's reader."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
# tests/e2e/processes.py: what these tests start stops with the run.
sys.path.append(str(Path(__file__).resolve().parents[1] / "e2e"))

import processes  # noqa: E402
from readers import READERS, ROOT, TOOL, Filter, Reader, available, folder_of  # noqa: E402


def pytest_configure(config):
    # A run stopped by SIGTERM or Ctrl-C stops the readers and MariaDB first.
    processes.install()


@pytest.fixture(scope="session")
def tool():
    subprocess.run(["cargo", "build", "-q", "--example", "account_oracle"], cwd=ROOT,
                   check=True)
    assert TOOL.exists(), TOOL
    f = Filter()
    yield f
    f.stop()


@pytest.fixture(scope="session")
def readers():
    started = []
    try:
        names = available()
        for folder in sorted({folder_of(n) for n in names}):
            subprocess.run(["bash", str(READERS / folder / "install.sh")], check=True)
        for name in names:
            started.append(Reader(name))
        yield started
    finally:
        for r in started:
            r.stop()

"""Fixtures of the account oracle: the real readers (each installed by its
own install.sh, idempotent) and the filter's reader."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from readers import READERS, ROOT, TOOL, Filter, Reader, available  # noqa: E402


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
        for name in available():
            subprocess.run(["bash", str(READERS / name / "install.sh")], check=True)
            started.append(Reader(name))
        yield started
    finally:
        for r in started:
            r.stop()

"""`ratebound console` for the tests: the real CLI (dist/ratebound, which
embeds the browser core; ./build.sh builds both) on a free loopback port,
and Debian's Chromium driven by Playwright (never a downloaded browser)."""
import os
import re
import subprocess
import time
from pathlib import Path

import processes
from harness import ROOT
from launcher import free_port

CLI = Path(os.environ.get("RATEBOUND_CLI", ROOT / "dist" / "ratebound"))
CHROMIUM = os.environ.get("RATEBOUND_CHROMIUM", "/usr/bin/chromium")
DOC_SHOTS = ROOT / "docs" / "console"
# A run of the suite leaves the work tree as it found it: the screenshots go
# to a git-ignored folder, and docs/console/ gets them only when asked
# (scripts/refresh-console-screenshots.sh sets RATEBOUND_REFRESH_DOCS=1).
REFRESH_DOCS = os.environ.get("RATEBOUND_REFRESH_DOCS") == "1"
SHOTS = DOC_SHOTS if REFRESH_DOCS else ROOT / "target" / "console-screenshots"
SHOTS.mkdir(parents=True, exist_ok=True)


class Console:
    """One `ratebound console FILE ...` process, stopped by stop()."""

    def __init__(self, file: Path, *args: str) -> None:
        assert CLI.exists(), f"{CLI} is missing: run ./build.sh first"
        self.file = file
        self.port = free_port()
        self.proc = processes.popen(
            [str(CLI), "console", str(file), "--listen", f"127.0.0.1:{self.port}", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
        deadline = time.time() + 15
        self.url = ""
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            m = re.match(r"(http://\S+\?token=([0-9a-f]+))$", line.strip())
            if m:
                self.url, self.token = m.group(1), m.group(2)
                break
        assert self.url, f"no URL from ratebound console: {self.proc.stderr.read() if self.proc.poll() is not None else ''}"
        self.origin = f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def alive(self) -> bool:
        return self.proc.poll() is None

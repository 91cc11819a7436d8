"""The store behaviour suite that `cargo test` runs over the in-memory store,
run again inside Envoy over real shared data: the module built with
`--features selftest` (dist/ratebound-selftest.wasm) runs it at VM start in
every VM and logs one line per check."""
import re
import time

from harness import DIST

SELFTEST = DIST / "ratebound-selftest.wasm"
CFG = {"instance": "suite", "routes": []}


def test_the_store_suite_passes_over_envoy_shared_data(envoy):
    assert SELFTEST.exists(), f"{SELFTEST} is missing: run ./build.sh --selftest"
    e = envoy(CFG, wasm=SELFTEST, concurrency=2)
    deadline = time.monotonic() + 10
    totals = []
    while time.monotonic() < deadline:
        totals = re.findall(r"store suite: (\d+) passed, (\d+) failed", e.log())
        if len(totals) >= 3:  # the main thread's VM and two workers'
            break
        time.sleep(0.1)
    failures = [l for l in e.log().splitlines() if "store suite: FAILED" in l]
    print(f"store suite in Envoy: {totals}")
    assert not failures, failures
    assert len(totals) >= 3, totals
    assert all(int(failed) == 0 and int(passed) >= 12 for passed, failed in totals), totals
    # Issue 41: tiers on one key in one entry, over real shared data.
    assert e.log().count("store suite: ok tiers_on_one_key_share_one_entry") >= 3, e.log()

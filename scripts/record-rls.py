#!/usr/bin/env python3
"""Records answers of the real envoyproxy/ratelimit into src/rls/recorded.rs,
for the unit tests of src/rls (which decode them and check the figures).

Starts a Redis and the service (tests/e2e/engines.py; both from
scripts/install-ratelimit.sh) on 127.0.0.1, sends ShouldRateLimit calls
with the same hand-written encoder the e2e tests use, checks each answer
has the expected code (so a recording never holds a surprise), and writes
the response bytes as hex. Also records the gRPC status of two failed calls
and one encoded request (the Rust encoder must produce the same bytes).

Usage: .venv/bin/python scripts/record-rls.py [--out src/rls/recorded.rs]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))

import grpc  # noqa: E402

from engines import (  # noqa: E402
    DAY, OK, OVER_LIMIT, RateLimitService, Redis, RlsClient, descriptor,
    decode_response, encode_request,
)

CONFIG = """\
domain: ratebound
descriptors:
  - key: bound
    value: yaml
    rate_limit:
      unit: hour
      requests_per_unit: 2
"""

DOMAIN = "ratebound"
YAML = descriptor(("bound", "yaml"))
OVERRIDE = descriptor(("bound", "installation"), ("caller", "c1"), limit=(5, DAY))


def record(tmp: Path) -> tuple[list[tuple[str, str, str]], dict[str, int], str, list[str]]:
    """([(name, hex, what)], {grpc status name: code}, request hex, redis keys)."""
    answers: list[tuple[str, str, str]] = []
    statuses: dict[str, int] = {}
    redis = Redis(tmp)
    rls = RateLimitService(redis, CONFIG, tmp)
    try:
        with RlsClient(rls.grpc_port) as client:
            def call(name, what, domain, descriptors, overall, codes):
                raw = client.call(encode_request(domain, descriptors))
                got = decode_response(raw)
                if got["overall"] != overall or [s["code"] for s in got["statuses"]] != codes:
                    raise SystemExit(f"{name}: unexpected answer {got}")
                answers.append((name, raw.hex(), what))
                return got

            call("OK_REMAINING_1", "bound=yaml (2 per hour in the YAML), 1st call",
                 DOMAIN, [YAML], OK, [OK])
            call("OK_REMAINING_0", "bound=yaml, 2nd call: OK, the last one taken",
                 DOMAIN, [YAML], OK, [OK])
            call("OVER_LIMIT", "bound=yaml, 3rd call",
                 DOMAIN, [YAML], OVER_LIMIT, [OVER_LIMIT])
            # The 3rd call was counted too; a hits_addend 0 call is not.
            yaml_key = redis.cli("KEYS", "ratebound_bound_yaml_*")
            if redis.cli("GET", yaml_key) != "3":
                raise SystemExit(f"{yaml_key}: {redis.cli('GET', yaml_key)}, not 3")
            call("CHECK_ONLY_OVER", "bound=yaml, hits_addend 0 (not counted): still over",
                 DOMAIN, [descriptor(("bound", "yaml"), hits_addend=0)],
                 OVER_LIMIT, [OVER_LIMIT])
            if redis.cli("GET", yaml_key) != "3":
                raise SystemExit(f"hits_addend 0 counted: {redis.cli('GET', yaml_key)}")
            call("UNKNOWN_DESCRIPTOR", "nothing=here, not in the YAML: OK, no limit",
                 DOMAIN, [descriptor(("nothing", "here"))], OK, [OK])
            call("OVERRIDE", "bound=installation,caller=c1 with override 5 per day",
                 DOMAIN, [OVERRIDE], OK, [OK])
            call("TWO_DESCRIPTORS", "[override 5/day caller=c2, bound=yaml]: the 2nd over",
                 DOMAIN, [descriptor(("bound", "installation"), ("caller", "c2"),
                                     limit=(5, DAY)), YAML],
                 OVER_LIMIT, [OK, OVER_LIMIT])
            call("UNKNOWN_DOMAIN_OVERRIDE",
                 "domain 'nobody' (not in the YAML), override 5/day: OK, no limit",
                 "nobody", [OVERRIDE], OK, [OK])
            keys = sorted(redis.cli("KEYS", "*").splitlines())

            def failed(name, domain, descriptors):
                try:
                    client.call(encode_request(domain, descriptors))
                except grpc.RpcError as e:
                    statuses[name] = e.code().value[0]
                    return
                raise SystemExit(f"{name}: the call did not fail")

            failed("GRPC_STATUS_EMPTY_DESCRIPTORS", DOMAIN, [])
            redis.stop()
            failed("GRPC_STATUS_REDIS_DOWN", DOMAIN, [YAML])
            redis.start()
    except BaseException:
        print(rls.log(), file=sys.stderr)
        raise
    finally:
        rls.stop()
        redis.stop()
    return answers, statuses, encode_request(DOMAIN, [OVERRIDE]).hex(), keys


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "src" / "rls" / "recorded.rs"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="record-rls-") as tmp:
        answers, statuses, request_hex, keys = record(Path(tmp))
    when = time.strftime("%Y-%m-%d", time.gmtime())
    lines = [
        "//! Answers of the real envoyproxy/ratelimit, recorded by scripts/record-rls.py",
        f"//! on {when} (service {version()},",
        "//! redis-server from Debian), over a Redis on 127.0.0.1, with this YAML",
        "//! (domain `ratebound`):",
        "//! `bound=yaml`: 2 requests per hour. Calls in this order; each answer's code",
        "//! was checked when recorded. Hex of the `RateLimitResponse` message.",
        "//! Regenerate: `.venv/bin/python scripts/record-rls.py`.",
        "",
    ]
    for name, hexed, what in answers:
        lines += [f"/// {what}.", f'pub const {name}: &str = "{hexed}";', ""]
    for name, code in statuses.items():
        what = {"GRPC_STATUS_EMPTY_DESCRIPTORS": "A request without descriptors",
                "GRPC_STATUS_REDIS_DOWN": "bound=yaml while Redis is stopped"}[name]
        lines += [f"/// {what}: the gRPC status of the failed call.",
                  f"pub const {name}: u32 = {code};", ""]
    lines += [
        "/// The request of `OVERRIDE`, as the recorder encoded it (and the service",
        "/// accepted it): domain `ratebound`, entries bound=installation and",
        "/// caller=c1, override 5 per day, hits_addend 1.",
        f'pub const OVERRIDE_REQUEST: &str = "{request_hex}";',
        "",
        "/// The Redis keys after the calls (the window start is the last part).",
        "pub const REDIS_KEYS: &[&str] = &[",
        *[f'    "{k}",' for k in keys],
        "];",
    ]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"record-rls: wrote {args.out}")
    for name, hexed, _ in answers:
        print(f"  {name}: {decode_response(bytes.fromhex(hexed))}")
    for name, code in statuses.items():
        print(f"  {name}: {code}")
    print(f"  keys: {keys}")


def version() -> str:
    script = (ROOT / "scripts" / "install-ratelimit.sh").read_text()
    for line in script.splitlines():
        if line.startswith("RATELIMIT_VERSION="):
            return line.split("=", 1)[1].strip('"')
    return "?"


if __name__ == "__main__":
    main()

"""A sample of the account oracle's corpus (tests/oracle) end to end: the
native property stands on examples/account_oracle reading a request as the
module in a real Envoy does. Here the same bytes go to a real Envoy with
the module, the real rate-limit service and Redis: what Envoy answers must
be what the oracle's filter side said (the same refusal and reason, or the
attempt admitted and counted); a request Envoy's own codec refuses never
reaches the filter or the upstream, which is a refusal too."""
from __future__ import annotations

import json
import random
import socket
import subprocess
import sys
from pathlib import Path

from engines import rls_yaml
from launcher import grpc_cluster

ORACLE = Path(__file__).resolve().parents[1] / "oracle"
sys.path.insert(0, str(ORACLE))

from corpus import corpus  # noqa: E402
from readers import ROOT, TOOL  # noqa: E402

SAMPLE = 150


def send(port: int, raw: bytes) -> tuple[int, bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(raw)
        data = b""
        while True:
            c = s.recv(65536)
            if not c:
                break
            data += c
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def test_a_sample_of_the_corpus_is_answered_as_the_oracle_read_it(
        envoy_factory, rate_limit_service, upstream, tmp_path):
    cfg = json.loads((ORACLE / "routes.json").read_text())
    for r in cfg["routes"]:
        r["bounds"][0]["limit"] = 100000  # reading, not limiting, is under test
    svc = rate_limit_service(rls_yaml(cfg, tmp_path))
    e = envoy_factory(cfg, clusters=[grpc_cluster("rls", svc.grpc_port)],
                      upstream_port=upstream.port)
    e.wait_value(lambda: e.stat("cluster.rls.upstream_rq_200"),
                 lambda v: v >= e.concurrency + 1, timeout=10.0)
    subprocess.run(["cargo", "build", "-q", "--example", "account_oracle"], cwd=ROOT,
                   check=True)
    cases = random.Random(3600).sample(corpus(), SAMPLE)
    tool = subprocess.run([str(TOOL)], input="".join(c.tool_line() + "\n" for c in cases),
                          capture_output=True, text=True, check=True)
    said = [json.loads(line) for line in tool.stdout.splitlines()]
    wrong, by_envoy, admitted = [], 0, 0
    for case, verdict in zip(cases, said):
        status, body = send(e.port, case.raw())
        reason = None
        if status != 200:
            try:
                reason = json.loads(body).get("reason")
            except ValueError:
                by_envoy += 1  # Envoy's codec: never reached the filter
                continue
        if "refused" in verdict:
            ok = (status, reason) == (verdict["status"], verdict["refused"])
        else:
            ok = status == 200
            admitted += ok
        if not ok:
            wrong.append(f"{case.name}: Envoy {status} {reason}, the oracle's filter {verdict}")
    print(f"\noracle sample: {SAMPLE} requests, {admitted} admitted and counted, "
          f"{SAMPLE - admitted - by_envoy - len(wrong)} refused as the oracle said, "
          f"{by_envoy} refused by Envoy's codec, {len(wrong)} otherwise")
    assert not wrong, "\n".join(wrong)
    assert admitted > 20 and by_envoy < SAMPLE // 4
    assert "panicked" not in e.log()

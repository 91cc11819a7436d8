"""A rollout from shadow to enforced, in a real Envoy: a bound enforced in
part refuses its share of what it would refuse; every request it lets
through although it would have refused it carries a mark an operator can
see, in the filter state (the access log) and a request header for the
upstream (docs/rollout.md)."""
import time

from harness import addr, request

LOG_FORMAT = "%RESPONSE_CODE% [%FILTER_STATE(wasm.ratebound.would_refuse:PLAIN)%] [%REQ(X-RATEBOUND-WOULD-REFUSE)%]\n"


def config(**bound) -> dict:
    return {
        "instance": "rollout",
        "would_refuse_header": "x-ratebound-would-refuse",
        "routes": [{"name": "api", "bounds": [
            {"name": "addr", "per": "address", "limit": 1, "window": "PT1H", **bound}]}],
    }


def access_log(path) -> dict:
    return {"access_log": [{
        "name": "envoy.access_loggers.file",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog",
            "path": str(path),
            "log_format": {"text_format_source": {"inline_string": LOG_FORMAT}},
        },
    }]}


def log_lines(path, n: int) -> list[str]:
    """The first `n` lines of the access log (Envoy flushes it on a timer)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        lines = path.read_text().splitlines() if path.exists() else []
        if len(lines) >= n:
            return lines[:n]
        time.sleep(0.2)
    raise AssertionError(f"{path}: {len(lines)} of {n} access log lines")


def test_a_bound_enforced_in_part_refuses_its_share_and_marks_the_rest(envoy, tmp_path):
    log = tmp_path / "access.log"
    e = envoy(config(enforce_percent=40), hcm=access_log(log))
    src = addr(61)
    statuses = [request(e.port, "/x", src=src)[0] for _ in range(101)]
    assert statuses[0] == 200
    refused = statuses[1:].count(429)
    # 40% of 100 would-be refusals, drawn per request: 40 ± 4.5 sd.
    assert 20 <= refused <= 60, refused
    assert statuses[1:].count(200) == 100 - refused
    lines = log_lines(log, 101)
    assert lines[0] == "200 [-] [-]", lines[0]
    marked = "200 [api/addr] [api/addr]"
    assert sum(1 for l in lines[1:] if l == marked) == 100 - refused, lines[:10]
    assert all(l == marked or l.startswith("429 ") for l in lines[1:]), lines[:10]
    # The spared requests were not counted: the caller holds its one admission.
    # (Handed to Envoy on each worker's tick.)
    name = "wasmcustom.ratebound.rollout.api.addr."
    would = e.wait_value(lambda: e.stats().get(name + "would_refuse"), lambda v: v == 100 - refused)
    assert would == 100 - refused
    assert e.stats()[name + "allowed"] == 1


def test_a_shadow_bound_marks_every_request_it_would_refuse(envoy, tmp_path):
    log = tmp_path / "access.log"
    e = envoy(config(shadow=True), hcm=access_log(log))
    src = addr(62)
    assert [request(e.port, "/x", src=src)[0] for _ in range(4)] == [200] * 4
    lines = log_lines(log, 4)
    assert lines == ["200 [-] [-]"] + ["200 [api/addr] [api/addr]"] * 3, lines


def test_a_forged_mark_never_reaches_the_upstream(envoy, upstream):
    """Issue 36: a client's own `x-ratebound-would-refuse` reached the
    upstream on every request no bound would refuse, and on paths no route
    matches. Now the filter removes it on entry; the upstream sees only the
    filter's own mark."""
    cfg = config(shadow=True)
    cfg["routes"][0]["match"] = {"path_prefix": "/up/api/"}
    e = envoy(cfg, upstream_port=upstream.port)
    forged = {"x-ratebound-would-refuse": "api/forged"}
    seen = []
    for path in ["/up/elsewhere", "/up/api/a", "/up/api/a", "/up/elsewhere"]:
        status, _, _ = request(e.port, path, src=addr(63), headers=forged)
        assert status == 200, (path, status)
        seen.append(upstream.last_headers.get("x-ratebound-would-refuse"))
    # Unmatched, admitted, marked by the shadow bound, unmatched again.
    assert seen == [None, None, ["api/addr"], None], seen

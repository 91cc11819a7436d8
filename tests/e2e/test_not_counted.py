"""A refused request is not counted: a caller that keeps hammering while
refused is admitted again as soon as its real rate allows."""
import time

from harness import addr, request, wait_window_start

CFG = {
    "instance": "nc",
    "routes": [
        {"name": "r", "match": {"route_name": "direct"},
         "bounds": [{"name": "per_address", "per": "address", "limit": 3, "window": "PT2S"}]},
    ],
}


def test_hammering_while_refused_does_not_extend_the_lockout(envoy):
    # Windows are aligned to the clock: [2k, 2k+2). Start at T = a window start.
    #   T+0.05       3 admitted                       cur=3, prev=0
    #   T+0.1..1.9   hammer: estimate 3 -> all 429    (counted: cur would be 3+N)
    #   T+2+x        prev=3: estimate 3*(1-x/2): admitted by x ~ 0.67 s at the
    #                latest (estimate + 1 <= 3); if the N refusals had been
    #                counted, not before x = 2*(1-2/(3+N)) ~ 1.9 s.
    e = envoy(CFG)
    src = addr(20)
    T = wait_window_start(2.0, at=0.05, max_elapsed=0.15)
    for _ in range(3):
        status, h, _ = request(e.port, "/", src=src)
        assert status == 200, (status, h)
    hammered = []
    while time.time() < T + 1.9 and len(hammered) < 5000:
        hammered.append(request(e.port, "/", src=src)[0])
    assert hammered and set(hammered) == {429}, {s: hammered.count(s) for s in set(hammered)}
    refused_during = len(hammered)  # all 429 (asserted above)

    admitted_at = None
    polls = 0
    while time.time() < T + 3.5 and polls < 1000:
        now = time.time()
        status, _, _ = request(e.port, "/", src=src)
        polls += 1
        if status == 200:
            admitted_at = now - (T + 2.0)
            break
        time.sleep(0.02)
    print(f"hammered {len(hammered)} refusals in ~1.8 s; admitted again "
          f"{admitted_at if admitted_at is None else round(admitted_at, 3)} s into the next window "
          f"after {polls} polls")
    assert admitted_at is not None, "still refused 1.5 s into the next window"
    # with the three admitted only, the estimate allows a fourth by x = 2/3 s
    assert admitted_at <= 1.0, admitted_at
    assert e.rb("nc", "r", "per_address", "allowed") == 4
    assert e.rb("nc", "r", "per_address", "refused") == refused_during + polls - 1


def test_retry_after_is_when_the_caller_is_admitted(envoy):
    # Retry-After is whole seconds rounded up from the true delay d, so
    # R-1 < d <= R: still refused a little before R-1, admitted just after R.
    cfg = {
        "instance": "ra",
        "routes": [
            {"name": "r", "match": {"route_name": "direct"},
             "bounds": [{"name": "per_address", "per": "address", "limit": 2, "window": "PT2S"}]},
        ],
    }
    e = envoy(cfg)
    src = addr(21)
    wait_window_start(2.0, at=0.3, max_elapsed=0.6)
    assert [request(e.port, "/", src=src)[0] for _ in range(2)] == [200, 200]
    t_before = time.time()
    status, h, _ = request(e.port, "/", src=src)
    t_after = time.time()
    assert status == 429
    R = int(h["retry-after"])
    assert R == int(h["ratelimit-reset"]) and 1 <= R <= 4, h
    early = t_before + R - 1 - 0.15
    if early > time.time():
        time.sleep(early - time.time())
        s_early = request(e.port, "/", src=src)[0]
    else:
        s_early = None
    time.sleep(max(0.0, t_after + R + 0.15 - time.time()))
    s_late = request(e.port, "/", src=src)[0]
    print(f"retry-after {R}: at R-1-0.15 s -> {s_early}, at R+0.15 s -> {s_late}")
    if s_early is not None:
        assert s_early == 429
    assert s_late == 200

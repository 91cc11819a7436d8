"""Identity end to end: JWT tiers, forged headers and X-Forwarded-For,
per-token counting without leaking the token, the session resolve (cached,
never called for a request refused before identity), anonymous fallback."""
import json

import pytest

from harness import ensure_room, request, settle_stats
from identity_env import USER_HEADER, IdentityEnvoy, SessionService, bearer, jwt


def statuses(port, n, **kw):
    return [request(port, "/api", **kw)[0] for _ in range(n)]


def route(bounds, **extra):
    return {"name": "api", "match": {"path_prefix": "/api"}, "bounds": bounds, **extra}


def test_roles_from_a_verified_jwt_make_pricing_tiers(envoy):
    cfg = {
        "instance": "tiers",
        "identity": {"jwt": {"roles_claim": "roles"}},
        "routes": [route([
            {"name": "partner", "per": "user", "applies_to": {"roles": ["partner"]},
             "limit": 4, "window": "PT1M"},
            {"name": "trial", "per": "user", "applies_to": {"roles": ["trial"]},
             "limit": 2, "window": "PT1M"},
        ])],
    }
    e = envoy(cfg, cls=IdentityEnvoy)
    ensure_room(60, 10)
    alice = bearer(sub="alice", roles=["partner", "beta"])
    dave = bearer(sub="dave", roles=["partner"])
    bob = bearer(sub="bob", roles=["trial"])
    carol = bearer(sub="carol")
    assert statuses(e.port, 5, headers=alice) == [200] * 4 + [429]
    assert statuses(e.port, 4, headers=dave) == [200] * 4, "one budget per user, not per tier"
    assert statuses(e.port, 3, headers=bob) == [200, 200, 429]
    status, h, body = request(e.port, "/api", headers=bob)
    assert status == 429 and json.loads(body)["bound"] == "trial"
    assert h["ratelimit-limit"] == "2"
    # Narrowed bounds leave everyone they do not describe unbounded.
    assert statuses(e.port, 8, headers=carol) == [200] * 8
    assert e.rb("tiers", "api", "partner", "allowed") == 8
    assert e.rb("tiers", "api", "trial", "refused") == 2
    # jwt_authn's default removes the token once verified: nothing to
    # remember it by, so every request read the verified claims.
    assert e.rb("tiers", what="jwt_cache_hits") == 0
    # The console's warning, logged by the filter once (not once per VM).
    warned = [l for l in e.log().splitlines() if "ratebound configuration warning" in l]
    assert len(warned) == 1 and "narrowed-only" in warned[0], warned


def test_a_verified_token_is_remembered_and_only_a_verified_one(envoy):
    """When jwt_authn forwards the token, the second request with a token it
    verified reads no metadata (jwt_cache_hits); a token in another header
    than the one verified, even one claiming a user, is never remembered and
    never counted as that user."""
    cfg = {
        "instance": "jwtmem",
        "identity": {"jwt": {"roles_claim": "roles"}},
        "routes": [route([{"name": "user", "per": "user", "limit": 3, "window": "PT1M"}])],
    }
    e = envoy(cfg, cls=IdentityEnvoy, concurrency=1, forward_token=True)
    ensure_room(60, 10)
    alice = bearer(sub="alice", roles=["partner"])
    assert statuses(e.port, 4, headers=alice) == [200, 200, 200, 429]
    assert statuses(e.port, 1, headers=bearer(sub="bob")) == [200]
    settle_stats()
    assert e.rb("jwtmem", what="jwt_cache_hits") == 3, "alice's 2nd-4th requests"
    assert e.rb("jwtmem", "api", "user", "refused") == 1

    # Misconfigured on purpose: ratebound looks for the token in x-other,
    # jwt_authn verifies Authorization. A forged x-other token claiming
    # "mallory" never names the caller, and is never remembered.
    cfg2 = {
        "instance": "jwtmem2",
        "identity": {"jwt": {"token_header": "x-other"}},
        "routes": [route([{"name": "user", "per": "user", "limit": 2, "window": "PT1M"}])],
    }
    e2 = envoy(cfg2, cls=IdentityEnvoy, concurrency=1)
    forged = jwt(sub="mallory").rsplit(".", 1)[0] + ".Zm9yZ2Vk"
    for who in ("carol", "dave"):
        h = {**bearer(sub=who), "x-other": forged}
        assert statuses(e2.port, 3, headers=h) == [200, 200, 429], who
    settle_stats()
    assert e2.rb("jwtmem2", what="jwt_cache_hits") == 0


def test_forged_identity_header_and_forwarded_for_change_nothing(envoy):
    cfg = {
        "instance": "forge",
        "identity": {"header": {"user": USER_HEADER}},
        "routes": [
            {"name": "addr", "match": {"path_prefix": "/addr"},
             "bounds": [{"per": "address", "limit": 2, "window": "PT1M"}]},
            route([{"name": "user", "per": "user", "limit": 2, "window": "PT1M"}]),
        ],
    }
    e = envoy(cfg, cls=IdentityEnvoy)
    ensure_room(60, 10)
    victim = bearer(sub="victim")  # jwt_authn copies the verified sub into x-user-id
    assert request(e.port, "/api", src="127.0.3.9", headers=victim)[0] == 200
    # The attacker claims to be the victim: Envoy strips the header, so the
    # attacker is anonymous and counted on its own address.
    forged = {USER_HEADER: "victim"}
    assert statuses(e.port, 3, src="127.0.3.1", headers=forged) == [200, 200, 429]
    # ...and the victim's budget is untouched (1 of 2 used).
    assert statuses(e.port, 2, src="127.0.3.9", headers=victim) == [200, 429]
    # Rotating forged identities from one address does not escape either.
    codes = [request(e.port, "/api", src="127.0.3.2", headers={USER_HEADER: f"u{i}"})[0]
             for i in range(3)]
    assert codes == [200, 200, 429]
    # X-Forwarded-For is not trusted (no trusted hops): rotating it changes nothing.
    codes = [request(e.port, "/addr", src="127.0.3.3",
                     headers={"x-forwarded-for": f"10.9.0.{i}"})[0] for i in range(3)]
    assert codes == [200, 200, 429]


def test_forwarded_for_counts_only_with_trusted_hops(envoy):
    cfg = {"instance": "xff", "routes": [
        {"name": "addr", "bounds": [{"per": "address", "limit": 2, "window": "PT1M"}]}]}
    e = envoy(cfg, xff_num_trusted_hops=1)
    ensure_room(60, 10)
    # With one trusted hop, Envoy takes the client from X-Forwarded-For.
    codes = [request(e.port, "/x", src="127.0.3.4",
                     headers={"x-forwarded-for": f"10.9.1.{i}"})[0] for i in range(4)]
    assert codes == [200] * 4
    same = [request(e.port, "/x", src="127.0.3.5",
                    headers={"x-forwarded-for": "10.9.1.200"})[0] for _ in range(3)]
    assert same == [200, 200, 429]


def test_per_token_counting_never_shows_the_token(envoy):
    secret = "sk_live_7c1f9aSECRETb3e0"
    cfg = {
        "instance": "tok",
        "identity": {"header": {"token": "x-api-key"}},
        "routes": [route([{"name": "tok", "per": "token", "limit": 2, "window": "PT1M"}])],
    }
    e = envoy(cfg, cls=IdentityEnvoy)
    ensure_room(60, 10)
    assert statuses(e.port, 3, headers={"x-api-key": secret}) == [200, 200, 429]
    assert statuses(e.port, 2, headers={"x-api-key": secret + "2"}) == [200, 200]
    e.stop()
    assert "SECRET" not in e.log(), "the token reached Envoy's log"


@pytest.fixture
def session():
    s = SessionService({
        "abc": {"user": "u-abc", "roles": ["member"]},
        **{f"n{i}": {"user": f"n{i}"} for i in range(5)},
    })
    yield s
    s.close()


def test_session_resolve_is_cached_and_never_called_for_an_early_refusal(envoy, session):
    cfg = {
        "instance": "sess",
        "identity": {"session": {"cluster": "session", "cookie": "sid", "cache_ttl_s": 60}},
        "routes": [route([
            {"name": "addr", "per": "address", "limit": 3, "window": "PT1M"},
            {"name": "user", "per": "user", "limit": 2, "window": "PT1M"},
        ])],
    }
    # One worker, so the per-worker cache sees every request.
    e = envoy(cfg, cls=IdentityEnvoy, concurrency=1, session_port=session.port)
    ensure_room(60, 15)
    abc = {"cookie": "theme=dark; sid=abc"}
    assert statuses(e.port, 3, src="127.0.4.1", headers=abc) == [200, 200, 429]
    assert session.hits == 1, "later answers come from the cache"
    assert e.rb("sess", what="session_cache_hits") == 2
    # The refusal by the user bound was not counted by the address bound:
    # 127.0.4.1 has used 2 of its 3.
    assert request(e.port, "/api", src="127.0.4.1", headers={"cookie": "sid=n1"})[0] == 200
    assert session.hits == 2
    # Now the address bound refuses, before any identity is resolved.
    assert request(e.port, "/api", src="127.0.4.1", headers={"cookie": "sid=n2"})[0] == 429
    assert session.hits == 2, "a request refused early never calls the session service"
    # Unknown session (401): anonymous, counted per address by the user bound.
    unknown = {"cookie": "sid=nobody"}
    assert statuses(e.port, 3, src="127.0.4.2", headers=unknown) == [200, 200, 429]
    # The service failing: the configured outcome (anonymous) and a stat.
    session.fail = True
    assert request(e.port, "/api", src="127.0.4.3", headers={"cookie": "sid=n3"})[0] == 200
    assert e.rb("sess", what="identity_errors") >= 1
    total = e.rb("sess", what="session_calls") + e.rb("sess", what="session_cache_hits")
    print(f"session: {session.hits} service hits, cache hit rate "
          f"{e.rb('sess', what='session_cache_hits')}/{total}")


def test_a_malformed_session_answer_never_reaches_the_log(envoy):
    """A session service answering nonsense that carries identity values
    (a roles string, a token id, a user number, raw text): each failure is
    logged and counted, naming the field and its type, and none of the
    values reaches Envoy's log."""
    marker, number = "MARKER-5e55-a1b2", 73199313370
    s = SessionService({
        "roles": {"user": "u-roles", "roles": f"{marker} admin"},
        "token": {"user": "u-token", "token_id": {"id": marker}},
        "number": {"user": number},
        "list": [marker],
        "html": f"<html>{marker}</html>".encode(),
    })
    try:
        cfg = {
            "instance": "leak",
            "identity": {"session": {"cluster": "session", "cookie": "sid"}},
            "routes": [route([{"name": "user", "per": "user", "limit": 100,
                               "window": "PT1M"}])],
        }
        e = envoy(cfg, cls=IdentityEnvoy, concurrency=1, session_port=s.port)
        for sid in ("roles", "token", "number", "list", "html"):
            # on_error anonymous: let through, counted on the address
            assert request(e.port, "/api", headers={"cookie": f"sid={sid}"})[0] == 200, sid
        assert s.hits == 5
        assert e.rb("leak", what="identity_errors") == 5
        e.stop()
        log = e.log()
    finally:
        s.close()
    failed = [l for l in log.splitlines() if "ratebound session resolve failed" in l]
    assert len(failed) == 5, failed
    assert any("roles is a string, expected a list of strings" in l for l in failed), failed
    assert any("user is a number, expected a string" in l for l in failed), failed
    assert marker not in log, [l for l in log.splitlines() if marker in l]
    assert str(number) not in log, [l for l in log.splitlines() if str(number) in l]

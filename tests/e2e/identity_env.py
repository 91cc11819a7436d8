"""Identity sources for the e2e tests: JWTs the tests sign (HS256, stdlib
only), a session service on loopback that counts its hits, and an Envoy
with jwt_authn in front of ratebound and the client-supplied identity
headers stripped before any filter runs."""
import base64
import hashlib
import hmac
import json

from harness import RATEBOUND, Envoy, LocalServer, static_cluster

SECRET = b"ratebound-e2e-jwt-secret-0123456789abcdef"
USER_HEADER = "x-user-id"


def _b64(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def jwks() -> str:
    return json.dumps({"keys": [{"kty": "oct", "alg": "HS256", "k": _b64(SECRET)}]})


def jwt(**claims) -> str:
    claims.setdefault("iss", "e2e")
    head = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = _b64(json.dumps(claims).encode())
    sig = hmac.new(SECRET, f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{_b64(sig)}"


def bearer(**claims) -> dict:
    return {"authorization": "Bearer " + jwt(**claims)}


class SessionService(LocalServer):
    """Answers GET /session: the `sid` cookie names a user in `users` (its
    answer as JSON, or bytes sent as they are); unknown cookies get 401;
    `fail` makes it answer 500."""

    def __init__(self, users: dict[str, dict]) -> None:
        self.users = users
        self.fail = False
        super().__init__()

    def answer(self, path, headers):
        cookie = headers.get("cookie", "")
        sid = cookie.split("sid=", 1)[1].split(";")[0] if "sid=" in cookie else ""
        if self.fail:
            code, body = 500, b"boom"
        elif sid in self.users:
            user = self.users[sid]
            code, body = 200, user if isinstance(user, bytes) else json.dumps(user).encode()
        else:
            code, body = 401, b"{}"
        return code, [("content-type", "application/json")], body


class IdentityEnvoy(Envoy):
    """The harness Envoy plus: jwt_authn (optional JWT; a verified `sub` is
    also copied into x-user-id by jwt_authn itself), x-user-id removed from
    every client request before any filter, and a `session` cluster."""

    def __init__(self, *a, session_port: int | None = None, forward_token: bool = False,
                 **kw) -> None:
        self.session_port = session_port
        # jwt_authn removes the verified token from the request unless told
        # to forward it (`forward`, Istio's forwardOriginalToken).
        self.forward_token = forward_token
        if session_port is not None:
            kw["clusters"] = [static_cluster("session", session_port)] + kw.get("clusters", [])
        hcm = {"early_header_mutation_extensions": [{
            "name": "envoy.http.early_header_mutation.header_mutation",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.http.early_header_mutation."
                         "header_mutation.v3.HeaderMutation",
                "mutations": [{"remove": USER_HEADER}],
            },
        }]}
        kw["hcm"] = {**hcm, **kw.get("hcm", {})}
        kw.setdefault("http_filters", [self._jwt_filter(), RATEBOUND])
        super().__init__(*a, **kw)

    def _jwt_filter(self) -> dict:
        return {
            "name": "envoy.filters.http.jwt_authn",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.jwt_authn.v3.JwtAuthentication",
                "providers": {"e2e": {
                    "issuer": "e2e",
                    "local_jwks": {"inline_string": jwks()},
                    "payload_in_metadata": "payload",
                    "forward": self.forward_token,
                    "claim_to_headers": [{"header_name": USER_HEADER, "claim_name": "sub"}],
                }},
                "rules": [{"match": {"prefix": "/"}, "requires": {"requires_any": {
                    "requirements": [{"provider_name": "e2e"}, {"allow_missing": {}}]}}}],
            },
        }

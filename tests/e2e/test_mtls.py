"""The mTLS peer as identity: Envoy requires a client certificate; its URI
SAN (a SPIFFE id) is the user and its namespace the organisation. The
certificates are made here with openssl."""
import http.client
import json
import ssl
import subprocess

from harness import Envoy, ensure_room


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_pki(d):
    """A CA, a server certificate for 127.0.0.1, and client certificates
    whose URI SANs are SPIFFE ids."""
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=e2e-ca",
             "-keyout", "ca.key", "-out", "ca.crt", cwd=d)

    def issue(name, subject, san):
        (d / f"{name}.ext").write_text(f"subjectAltName={san}\n")
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", subject,
                 "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=d)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                 "-CAcreateserial", "-days", "2", "-extfile", f"{name}.ext",
                 "-out", f"{name}.crt", cwd=d)

    issue("server", "/CN=127.0.0.1", "IP:127.0.0.1")
    issue("web", "/CN=web", "URI:spiffe://td/ns/shop/sa/web")
    issue("api", "/CN=api", "URI:spiffe://td/ns/shop/sa/api")
    issue("other", "/CN=other", "URI:spiffe://td/ns/other/sa/web")


class MtlsEnvoy(Envoy):
    """The harness Envoy with a TLS listener that requires a client certificate."""

    def __init__(self, *a, pki=None, **kw):
        super().__init__(*a, **kw)
        self.pki = pki

    def _listener(self, filter_config) -> dict:
        listener = super()._listener(filter_config)
        listener["filter_chains"][0]["transport_socket"] = {
            "name": "envoy.transport_sockets.tls",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext",
                "require_client_certificate": True,
                "common_tls_context": {
                    "tls_certificates": [{
                        "certificate_chain": {"filename": f"{self.pki}/server.crt"},
                        "private_key": {"filename": f"{self.pki}/server.key"},
                    }],
                    "validation_context": {"trusted_ca": {"filename": f"{self.pki}/ca.crt"}},
                },
            },
        }
        return listener


def get(port, pki, who):
    ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    ctx.load_cert_chain(str(pki / f"{who}.crt"), str(pki / f"{who}.key"))
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=10)
    try:
        conn.request("GET", "/api")
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def test_the_mtls_peer_is_the_user_and_its_namespace_the_org(envoy, tmp_path):
    pki = tmp_path / "pki"
    pki.mkdir()
    make_pki(pki)
    cfg = {
        "instance": "mtls",
        "identity": {"mtls": {"org_from_namespace": True}},
        "routes": [{"name": "api", "bounds": [
            {"name": "user", "per": "user", "limit": 2, "window": "PT1M"},
            {"name": "org", "per": "org", "limit": 3, "window": "PT1M"},
        ]}],
    }
    e = envoy(cfg, cls=MtlsEnvoy, pki=pki)
    ensure_room(60, 10)
    web = [get(e.port, pki, "web") for _ in range(3)]
    assert [s for s, _ in web] == [200, 200, 429]
    assert json.loads(web[2][1])["bound"] == "user"
    # Another workload of the same namespace: its own user budget, but the
    # namespace (org) has one left of 3.
    api = [get(e.port, pki, "api") for _ in range(2)]
    assert [s for s, _ in api] == [200, 429]
    assert json.loads(api[1][1])["bound"] == "org"
    # The same workload name in another namespace is another user and org.
    assert [get(e.port, pki, "other")[0] for _ in range(2)] == [200, 200]

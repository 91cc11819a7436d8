"""Every shipped Istio manifest against the real CRD schemas of pinned Istio
releases (tests/data/istio-crd/, extracted from istio.io/api's published
kubernetes/customresourcedefinitions.gen.yaml; its README says how).

What the API server would check on `kubectl apply` is checked here:
  - the openAPIV3Schema, with Kubernetes' structural rules: an object with
    `properties` takes no other field unless it says
    x-kubernetes-preserve-unknown-fields (kubectl's default strict field
    validation refuses unknown fields), int-or-string is either;
  - the CEL rules (x-kubernetes-validations) of those schemas, each
    implemented below by its exact text: a rule the pinned schemas gain that
    is not implemented fails the test instead of passing unchecked;
  - the apiVersion is one the CRD serves.

The supported releases (Istio 1.27 on, docs/istio.md) must accept every
manifest; Istio 1.26 must refuse `failStrategy: FAIL_RELOAD`, and accept the
same manifests with the FAIL_CLOSE docs/istio.md tells 1.26 users to use.
"""
from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from urllib.parse import urlsplit

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CRD_DIR = ROOT / "tests" / "data" / "istio-crd"
SUPPORTED = ["v1.27.8", "v1.28.3", "v1.32.0"]
BEFORE_RELOAD = "v1.26.4"


# --- the pinned schemas ------------------------------------------------------

def crds(version: str) -> dict[tuple[str, str], dict]:
    """(group, kind) -> the extracted CRD record of one Istio release."""
    out = {}
    for path in sorted((CRD_DIR / version).glob("*.json")):
        rec = json.loads(path.read_text())
        out[(rec["group"], rec["kind"])] = rec
    assert out, f"no CRD schemas under {CRD_DIR / version}"
    return out


def schema_for(version: str, doc: dict) -> dict:
    group, _, api = doc["apiVersion"].partition("/")
    rec = crds(version).get((group, doc["kind"]))
    assert rec is not None, (
        f"no pinned CRD for {doc['kind']} ({group}): add it to KINDS in "
        f"{CRD_DIR / 'extract.py'} and re-extract")
    served = {v for v, d in rec["versions"].items() if d["served"]}
    assert api in served, f"{doc['apiVersion']} is not served by Istio {version} ({served})"
    return rec["versions"][api]["openAPIV3Schema"]


def structural(schema):
    """The openAPIV3Schema as jsonschema reads it, with the API server's rules."""
    if isinstance(schema, list):
        return [structural(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: structural(v) for k, v in schema.items()
           if k not in ("x-kubernetes-validations",)}
    if schema.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out.setdefault("anyOf", [{"type": "integer"}, {"type": "string"}])
    if ("properties" in schema and "additionalProperties" not in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    return out


# --- the CEL rules, by their exact text ---------------------------------------

def _count(self, *names):
    return sum(1 for n in names if n in self)


def _url_scheme(text):
    try:
        parts = urlsplit(text)
    except ValueError:
        return None
    if not parts.scheme or not (parts.netloc or parts.path):
        return None
    return parts.scheme


def _wasm_url(text):
    # isURL(self) ? scheme in [...] : (isURL("http://" + self) && ...)
    scheme = _url_scheme(text)
    if scheme is None:
        scheme = "" if _url_scheme("http://" + text) else None
        return scheme is not None
    return scheme in ("", "http", "https", "oci", "file")


def _duration_ms(text):
    m = re.fullmatch(r"((?:\d+(?:\.\d+)?(?:h|m|s|ms|us|ns))+)", text)
    if not m:
        return None
    scale = {"h": 3.6e6, "m": 6e4, "s": 1e3, "ms": 1, "us": 1e-3, "ns": 1e-6}
    return sum(float(n) * scale[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)(h|ms|us|ns|m|s)", text))


def _cel(text):
    return " ".join(text.split())


CEL = {_cel(k): v for k, v in {
    '(has(self.selector) ? 1 : 0) + (has(self.targetRef) ? 1 : 0) + (has(self.targetRefs) ? 1 : 0) <= 1':
        lambda s: _count(s, "selector", "targetRef", "targetRefs") <= 1,
    '(has(self.workloadSelector) ? 1 : 0) + (has(self.targetRefs) ? 1 : 0) <= 1':
        lambda s: _count(s, "workloadSelector", "targetRefs") <= 1,
    '(has(self.jwksUri) ? 1 : 0) + (has(self.jwks_uri) ? 1 : 0) + (has(self.jwks) ? 1 : 0) <= 1':
        lambda s: _count(s, "jwksUri", "jwks_uri", "jwks") <= 1,
    'self.all(key, !key.contains("*"))': lambda s: all("*" not in k for k in s),
    'self.all(key, key.size() != 0)': lambda s: all(len(k) != 0 for k in s),
    '!self.contains("*")': lambda s: "*" not in s,
    'self.size() == 0': lambda s: len(s) == 0,
    'url(self).getScheme() in ["http", "https"]': lambda s: _url_scheme(s) in ("http", "https"),
    "duration(self) >= duration('1ms')": lambda s: (_duration_ms(s) or 0) >= 1,
    '0 < self && self <= 65535': lambda s: 0 < s <= 65535,
    '(has(self.valueFrom) ? self.valueFrom : "") != "HOST" || !has(self.value)':
        lambda s: s.get("valueFrom", "") != "HOST" or "value" not in s,
    '(has(self.serviceAccounts) || has(self.notServiceAccounts)) ? (!has(self.principals) && '
    '!has(self.notPrincipals) && !has(self.namespaces) && !has(self.notNamespaces)) : true':
        lambda s: (not ({"serviceAccounts", "notServiceAccounts"} & s.keys())
                   or not ({"principals", "notPrincipals", "namespaces", "notNamespaces"} & s.keys())),
    'has(self.context) ? ((self.context == "WAYPOINT") ? has(self.waypoint) : !has(self.waypoint)) : !has(self.waypoint)':
        lambda s: (("waypoint" in s) == (s.get("context") == "WAYPOINT")),
    'isURL(self) ? (url(self).getScheme() in ["", "http", "https", "oci", "file"]) : (isURL("http://" + self) && '
    'url("http://" + self).getScheme() in ["", "http", "https", "oci", "file"])': _wasm_url,
}.items()}


def cel_errors(schema, value, path="spec"):
    """The CEL rules of `schema` that `value` breaks, walking it like the API server."""
    errors = []
    for rule in schema.get("x-kubernetes-validations", []) or []:
        check = CEL.get(_cel(rule["rule"]))
        if check is None:
            errors.append(f"{path}: CEL rule not implemented in this test: {rule['rule']!r}")
        elif not check(value):
            errors.append(f"{path}: {rule.get('message', rule['rule'])}")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for k, v in value.items():
            sub = props.get(k, extra if isinstance(extra, dict) else None)
            if sub is not None:
                errors += cel_errors(sub, v, f"{path}.{k}")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, v in enumerate(value):
            errors += cel_errors(schema["items"], v, f"{path}[{i}]")
    return errors


def validate(version: str, doc: dict) -> list[str]:
    """Why Istio `version`'s API server would refuse `doc` (empty: accepted)."""
    schema = schema_for(version, doc)
    body = {k: v for k, v in doc.items() if k not in ("apiVersion", "kind", "metadata")}
    validator = jsonschema.Draft4Validator(structural(schema))
    errors = [f"{'.'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}"
              for e in validator.iter_errors(body)]
    if "spec" in body:
        errors += cel_errors(schema["properties"]["spec"], body["spec"])
    return errors


# --- the manifests -----------------------------------------------------------

def manifest_files() -> list[Path]:
    files = sorted((ROOT / "envoy-demo" / "istio").glob("*.yaml"))
    files += sorted((ROOT / "dist" / "istio").glob("*.yaml"))  # build.sh's rendering, when built
    return files


# The sources under envoy-demo/istio are templates: @URL@ and @SHA256@ are
# filled in the way build.sh fills them (any 64 hex digits stand for the
# digest here; dist/istio/ has the real ones and is checked as it is).
EXAMPLE = {"@URL@": "oci://registry.example.com/ratebound:0.1.0", "@SHA256@": "0" * 64}


def documents(path: Path) -> list[dict]:
    text = path.read_text()
    if path.parent.parent.name == "envoy-demo":
        for k, v in EXAMPLE.items():
            text = text.replace(k, v)
    return [d for d in yaml.safe_load_all(text) if d]


def shipped() -> list[tuple[str, dict]]:
    """Every Istio object of the manifests. Kubernetes' own kinds (apiVersion
    `v1`: metrics.yaml's ConfigMap) have no CRD to check against; what that
    ConfigMap carries is checked by tests/istio_metrics.rs and run by
    tests/e2e/test_istiod.py."""
    out = []
    for path in manifest_files():
        for i, doc in enumerate(documents(path)):
            if doc.get("apiVersion") == "v1":
                continue
            out.append((f"{path.relative_to(ROOT)}#{i}", doc))
    return out


SHIPPED = shipped()


def test_the_pinned_schemas_are_there():
    for v in SUPPORTED + [BEFORE_RELOAD]:
        kinds = {k for _, k in crds(v)}
        assert {"WasmPlugin", "RequestAuthentication"} <= kinds, v
    src = (CRD_DIR / "README.md").read_text()
    for v in SUPPORTED + [BEFORE_RELOAD]:
        assert v in src, f"{v} is not described in tests/data/istio-crd/README.md"
    assert len([d for _, d in SHIPPED if d["kind"] == "WasmPlugin"]) >= 2


@pytest.mark.parametrize("version", SUPPORTED)
@pytest.mark.parametrize("name,doc", SHIPPED, ids=[n for n, _ in SHIPPED])
def test_supported_istio_accepts_every_manifest(version, name, doc):
    assert validate(version, doc) == [], name


@pytest.mark.parametrize("name,doc",
                         [(n, d) for n, d in SHIPPED if d["kind"] == "WasmPlugin"],
                         ids=[n for n, d in SHIPPED if d["kind"] == "WasmPlugin"])
def test_istio_1_26_refuses_fail_reload_and_takes_fail_close(name, doc):
    assert doc["spec"].get("failStrategy") == "FAIL_RELOAD", name
    errors = validate(BEFORE_RELOAD, doc)
    assert errors, f"{name}: Istio 1.26's CRD accepted FAIL_RELOAD"
    assert all(e.startswith("spec.failStrategy: 'FAIL_RELOAD' is not one of") for e in errors), errors
    # What docs/istio.md says to use on 1.26.
    older = copy.deepcopy(doc)
    older["spec"]["failStrategy"] = "FAIL_CLOSE"
    assert validate(BEFORE_RELOAD, older) == [], name


def test_rendered_sha256_is_a_digest_not_a_placeholder():
    rendered = [(n, d) for n, d in SHIPPED if n.startswith("dist/") and d["kind"] == "WasmPlugin"]
    if not rendered:
        pytest.skip("dist/istio/ not built (./build.sh renders it)")
    for name, doc in rendered:
        assert re.fullmatch(r"[0-9a-f]{64}", doc["spec"]["sha256"]), name
        assert "@" not in doc["spec"]["url"] or "@sha256:" in doc["spec"]["url"], name


# --- the validator catches what the API server would refuse -------------------

def _plugin() -> dict:
    doc = next(d for n, d in SHIPPED if n == "envoy-demo/istio/wasmplugin.yaml#0")
    return copy.deepcopy(doc)


@pytest.mark.parametrize("mutate,expect", [
    (lambda s: s.update(failstrategy="FAIL_OPEN"), "Additional properties are not allowed"),
    (lambda s: s.update(sha256="@SHA256@"), "does not match"),
    (lambda s: s.update(sha256="A" * 64), "does not match"),
    (lambda s: s.update(phase="LATE"), "is not one of"),
    (lambda s: s.update(url=""), "should be non-empty"),
    (lambda s: s.update(url="ftp://example.com/x.wasm"), "url must have schema one of"),
    (lambda s: s.update(targetRefs=[{"kind": "Gateway", "group": "gateway.networking.k8s.io",
                                      "name": "gw"}]),
     "only one of targetRefs or selector can be set"),
    (lambda s: s.update(targetRefs=[{"kind": "Gateway", "group": "gateway.networking.k8s.io"}])
     or s.pop("selector"),
     "'name' is a required property"),
    (lambda s: s["selector"]["matchLabels"].update({"app": "*"}), "wildcard not allowed"),
], ids=["unknown-field", "placeholder-sha256", "uppercase-sha256", "phase", "empty-url",
        "url-scheme", "selector-and-targetRefs", "targetRef-without-name", "wildcard-label"])
def test_the_validator_refuses(mutate, expect):
    doc = _plugin()
    assert validate(SUPPORTED[-1], doc) == []
    mutate(doc["spec"])
    errors = validate(SUPPORTED[-1], doc)
    assert any(expect in e for e in errors), errors


def test_a_cel_rule_it_does_not_know_fails_loudly():
    schema = {"type": "object", "x-kubernetes-validations": [{"rule": "self.frobnicate()"}]}
    assert cel_errors(schema, {}) == ["spec: CEL rule not implemented in this test: 'self.frobnicate()'"]


def test_requestauthentication_forwards_the_token():
    docs = [d for n, d in SHIPPED if d["kind"] == "RequestAuthentication" and n.startswith("envoy-demo/")]
    assert docs
    for doc in docs:
        for rule in doc["spec"]["jwtRules"]:
            assert rule.get("forwardOriginalToken") is True, (
                "ratebound remembers a token's identity only when it sees the token")

"""`ratebound console`'s server refuses what it must: a wrong or missing
token, another origin or host, oversized and malformed bodies, a save that
names another file, paths out of its pages; and it keeps serving."""
import http.client
import json
import socket

import pytest

from console_app import Console

CFG = {"routes": [{"name": "api", "bounds": [
    {"name": "per_address", "per": "address", "limit": 100, "window": "PT1M"}]}]}


@pytest.fixture
def server(tmp_path):
    f = tmp_path / "ratebound.json"
    f.write_text(json.dumps(CFG, indent=2))
    c = Console(f)
    yield c
    c.stop()


def call(c: Console, method: str, path: str, body=None, headers=None, token=True):
    h = {"Host": f"127.0.0.1:{c.port}"}
    if token:
        h["X-Ratebound-Token"] = c.token
    if body is not None:
        h["Content-Type"] = "application/json"
        if not isinstance(body, (bytes, str)):
            body = json.dumps(body)
    h.update(headers or {})
    conn = http.client.HTTPConnection("127.0.0.1", c.port, timeout=10)
    try:
        conn.request(method, path, body=body, headers=h)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def still_serving(c: Console):
    assert c.alive()
    status, body = call(c, "GET", "/api/state")
    assert status == 200 and json.loads(body)["config"] == CFG


def test_reads_and_writes_need_the_runs_token(server):
    assert call(server, "GET", "/api/state")[0] == 200
    assert call(server, "GET", "/api/state", token=False)[0] == 403
    assert call(server, "GET", "/api/state", headers={"X-Ratebound-Token": "0" * 32})[0] == 403
    assert call(server, "GET", "/api/state", headers={"X-Ratebound-Token": server.token[:-1]})[0] == 403
    before = server.file.read_text()
    cfg = json.loads(before)
    cfg["routes"][0]["bounds"][0]["limit"] = 7
    status, _ = call(server, "POST", "/api/save", {"config": cfg},
                     headers={"X-Ratebound-Token": "f" * 32})
    assert status == 403
    assert server.file.read_text() == before
    # The page itself holds no data: it is served without the token.
    assert call(server, "GET", "/", token=False)[0] == 200
    still_serving(server)


def test_cross_origin_requests_and_other_hosts_are_refused(server):
    cfg = dict(CFG)
    for headers in ({"Origin": "http://evil.example"},
                    {"Origin": f"http://127.0.0.1:{server.port + 1}"},
                    {"Origin": "null"},
                    {"Sec-Fetch-Site": "cross-site"},
                    {"Host": "evil.example"},
                    {"Host": f"evil.example:{server.port}"}):
        assert call(server, "POST", "/api/save", {"config": cfg}, headers=headers)[0] == 403, headers
        assert call(server, "GET", "/api/state", headers=headers)[0] == 403, headers
    # Its own origin is welcome.
    assert call(server, "GET", "/api/state",
                headers={"Origin": server.origin, "Sec-Fetch-Site": "same-origin"})[0] == 200
    still_serving(server)


def test_oversized_and_malformed_bodies_are_refused_not_crashes(server):
    big = b'{"config": "' + b"x" * (3 << 20) + b'"}'
    assert call(server, "POST", "/api/preview", big)[0] == 413
    for body in (b"{", b"not json", b"[1, 2]", b'"text"', b"\xff\xfe", b"", b'{"config": 5}',
                 b'{"nope": {}}', b'{"config": {"routes": "x"}}'):
        status, answer = call(server, "POST", "/api/save", body)
        assert status in (400, 422), (body, status, answer)
    # Not JSON at all, or no body.
    assert call(server, "POST", "/api/save", "x", headers={"Content-Type": "text/plain"})[0] == 415
    assert call(server, "PUT", "/api/save", b"{}")[0] == 405
    assert call(server, "GET", "/api/nothing")[0] == 404
    # Garbage on the wire: the server answers or closes, and keeps serving.
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall(b"\x00\x01GARBAGE / HTTP/9.9\r\n\r\n")
        try:
            s.recv(1024)
        except OSError:
            pass
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall(b"POST /api/save HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n")
        try:
            s.recv(1024)
        except OSError:
            pass
    still_serving(server)


def test_only_file_is_ever_written(server, tmp_path):
    before = server.file.read_text()
    cfg = json.loads(before)
    cfg["routes"][0]["bounds"][0]["limit"] = 9
    other = tmp_path / "elsewhere.json"
    for name in ("../../etc/passwd", str(other), "/tmp/../etc/shadow"):
        status, answer = call(server, "POST", "/api/save", {"config": cfg, "file": name})
        assert status == 400, answer
        assert b"no other may be named" in answer
    assert not other.exists()
    assert server.file.read_text() == before
    # Paths out of the page are not files.
    for path in ("/../../etc/passwd", "/%2e%2e/%2e%2e/etc/passwd", "/api/../../etc/passwd",
                 "/core/../../Cargo.toml", "//etc/passwd"):
        status, body = call(server, "GET", path)
        assert status in (403, 404), (path, status)
        assert b"root:" not in body
    # An invalid configuration is never written.
    bad = json.loads(before)
    bad["routes"][0]["bounds"][0]["window"] = "1m"
    status, answer = call(server, "POST", "/api/save", {"config": bad})
    assert status == 422
    assert json.loads(answer)["errors"][0]["path"] == "$.routes[0].bounds[0].window"
    assert server.file.read_text() == before
    # The valid one is.
    status, answer = call(server, "POST", "/api/save", {"config": cfg})
    assert status == 200, answer
    assert json.loads(server.file.read_text())["routes"][0]["bounds"][0]["limit"] == 9
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ratebound.json"]


def test_a_file_changed_on_disk_is_not_overwritten(server):
    server.file.write_text(json.dumps(CFG) + "\n")  # changed behind the page's back
    status, answer = call(server, "POST", "/api/save", {"config": CFG})
    assert status == 409, answer
    assert server.file.read_text() == json.dumps(CFG) + "\n"


def test_listens_on_loopback_by_default(tmp_path):
    import subprocess

    import processes
    from console_app import CLI
    f = tmp_path / "c.json"
    f.write_text(json.dumps(CFG))
    p = processes.popen([str(CLI), "console", str(f)], stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        assert line.startswith(f"ratebound console: {f} on 127.0.0.1:"), line
        url = p.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and "?token=" in url, url
        assert len(url.split("token=")[1]) == 32
    finally:
        p.terminate()
        p.wait(5)


def test_a_file_that_does_not_exist_is_created_by_a_valid_save_only(tmp_path):
    f = tmp_path / "new.json"
    c = Console(f)
    try:
        status, body = call(c, "GET", "/api/state")
        state = json.loads(body)
        assert status == 200 and state["exists"] is False and state["config"] is None
        assert "does not exist yet" in state["note"], state
        assert not f.exists(), "starting the console creates nothing"
        bad = json.loads(json.dumps(CFG))
        bad["routes"][0]["bounds"][0]["window"] = "1m"
        assert call(c, "POST", "/api/save", {"config": bad})[0] == 422
        assert call(c, "POST", "/api/preview", {"config": CFG})[0] == 200
        assert not f.exists(), "neither an invalid save nor a preview creates FILE"
        status, answer = call(c, "POST", "/api/save", {"config": CFG})
        assert status == 200, answer
        assert json.loads(f.read_text()) == CFG
        assert json.loads(call(c, "GET", "/api/state")[1])["exists"] is True
        # Saved since: a later save is the ordinary one (FILE as it was saved).
        status, _ = call(c, "POST", "/api/save", {"config": CFG})
        assert status == 200
        assert sorted(p.name for p in tmp_path.iterdir()) == ["new.json"]
    finally:
        c.stop()


def test_a_file_created_behind_the_pages_back_is_not_overwritten(tmp_path):
    f = tmp_path / "new.yaml"
    c = Console(f)
    try:
        f.write_text("# someone else's\n")
        status, answer = call(c, "POST", "/api/save", {"config": CFG})
        assert status == 409, answer
        assert f.read_text() == "# someone else's\n"
    finally:
        c.stop()


def test_a_bound_added_to_a_commented_yaml_file_keeps_its_comments(tmp_path):
    text = ("# Rate limits of the shop: the platform team's.\n"
            "instance: shop   # prefixes every counter\n"
            "routes:\n"
            "  # The public API.\n"
            "  - name: api\n"
            "    bounds:\n"
            "      # Everyone, by address: raised after the March incident.\n"
            "      - name: per_address\n"
            "        per: address\n"
            "        limit: 100   # was 50\n"
            "        window: 'PT1M'\n")
    f = tmp_path / "ratebound.yaml"
    f.write_text(text)
    c = Console(f)
    try:
        status, body = call(c, "GET", "/api/state")
        cfg = json.loads(body)["config"]
        cfg["routes"][0]["bounds"].append(
            {"name": "whole_route", "per": "route", "limit": 1000, "window": "PT1M"})
        added = ("      - name: whole_route\n"
                 "        per: route\n"
                 "        limit: 1000\n"
                 "        window: PT1M\n")
        # The preview's diff: the new bound's lines added, nothing removed.
        status, body = call(c, "POST", "/api/preview", {"config": cfg})
        assert status == 200, body
        changes = json.loads(body)["changes"]
        assert [[op, line] for op, line in changes if op != " "] == [
            ["+", line] for line in added.splitlines()], changes
        status, body = call(c, "POST", "/api/save", {"config": cfg})
        assert status == 200, body
        assert f.read_text() == text + added
    finally:
        c.stop()

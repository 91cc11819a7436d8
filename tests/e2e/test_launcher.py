"""The launcher itself, as the installation-wide bounds will use it: extra
clusters (a gRPC service's), two Envoys with one filter configuration at
once, and a restart on the same ports."""
import json

from harness import addr, ensure_room, free_port, grpc_cluster, request

CFG = {
    "instance": "launch",
    "routes": [{"name": "r", "bounds": [
        {"name": "addr", "per": "address", "limit": 2, "window": "PT1M"}]}],
}


def test_two_envoys_share_a_grpc_cluster_and_one_restarts_on_its_ports(envoy):
    rls = free_port()  # nothing listens there: the cluster is only declared
    a = envoy(CFG, concurrency=1, clusters=[grpc_cluster("rls", rls, "2s")])
    b = envoy(CFG, concurrency=1, clusters=[grpc_cluster("rls", rls, "2s")])
    assert a.port != b.port and a.admin_port != b.admin_port

    # The cluster: STATIC, HTTP/2, 127.0.0.1:rls, in both.
    for e in (a, b):
        dump = json.loads(e.admin("/config_dump?resource=static_clusters"))
        (c,) = [x["cluster"] for x in dump["configs"] if x["cluster"]["name"] == "rls"]
        assert c["type"] == "STATIC" and c["connect_timeout"] == "2s"
        opts = c["typed_extension_protocol_options"]["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]
        assert "http2_protocol_options" in opts["explicit_http_config"]
        sa = c["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]["socket_address"]
        assert (sa["address"], sa["port_value"]) == ("127.0.0.1", rls)

    # One configuration, two Envoys: each counts on its own.
    ensure_room(60, 15)
    src = addr(3, base=95)
    assert [request(a.port, "/", src=src)[0] for _ in range(3)] == [200, 200, 429]
    assert [request(b.port, "/", src=src)[0] for _ in range(3)] == [200, 200, 429]

    # A restart: a new process on the same ports, with the configuration in
    # force; counts start again (they live in the process).
    port, admin_port, pid = a.port, a.admin_port, a.pid
    a.restart()
    assert (a.port, a.admin_port) == (port, admin_port) and a.pid != pid
    assert [request(a.port, "/", src=src)[0] for _ in range(3)] == [200, 200, 429]
    assert request(b.port, "/", src=src)[0] == 429, "the other Envoy kept serving, and its counts"


def test_a_chosen_port_is_the_port(envoy):
    port, admin_port = free_port(), free_port()
    e = envoy(CFG, concurrency=1, port=port, admin_port=admin_port)
    assert (e.port, e.admin_port) == (port, admin_port)
    assert request(port, "/", src=addr(4, base=95))[0] == 200


def test_the_envoy_that_serves_is_the_line_asked_for(envoy):
    # RATEBOUND_ENVOY picks the binary (./test.sh: Envoy 1.36 for the core);
    # the running server says which version it is.
    import os
    import subprocess

    from harness import envoy_binary, envoy_version

    asked = os.environ.get("RATEBOUND_ENVOY")
    if asked:
        assert envoy_binary() == asked
    e = envoy(CFG, concurrency=1)
    info = json.loads(e.admin("/server_info"))
    running = tuple(int(x) for x in info["version"].split("/")[1].split("."))
    assert running == envoy_version()
    out = subprocess.run([envoy_binary(), "--version"], capture_output=True, text=True,
                         timeout=30).stdout
    assert "/{}.{}.{}/".format(*running) in out
    print(f"Envoy {'.'.join(map(str, running))} from {envoy_binary()}")

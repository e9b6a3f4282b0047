"""A route names a port of *its* sandbox and nothing else: every way a tenant or an outside client
could point the ingress elsewhere (ports, host names, rewrites, absolute request lines, front-proxy
headers, the path form's dot segments) is tried for real and must fail, and opening the host to
the ingress's connections must not open it to anything the sandbox starts.

Each attack has a positive control in the same test (the same sandbox's own app answers), so a
refusal is the isolation and not a broken set-up."""
from __future__ import annotations

import httpx
import pytest

from tests.helpers import ok

from .netlab import HostListener, gateway_of, is_open, probe, start_listener_session
from .test_ingress import app_service, get, install_app, raw_request

APP_PORT = 8090
NEIGHBOUR_PORT = 7002


@pytest.fixture(scope="module")
def listener():
    sock = HostListener()
    yield sock
    sock.close()


@pytest.fixture
def exposed(server, http, sandboxes, listener):
    """Sandbox A with its app on APP_PORT and routes that name the API's port, a host listener's
    port and a port on which neighbour sandbox B listens; B's listener answers 'neighbour secret'."""
    a, b = sandboxes(), sandboxes()
    install_app(http, a)
    start_listener_session(http, b, NEIGHBOUR_PORT)
    manual = [{"id": f"p{port}", "port": port, "ingress": {"public": True}, "runtime": {"type": "manual"}}
              for port in (server.port, listener.port, NEIGHBOUR_PORT)]
    ok(http.put(f"/api/v1/sandboxes/{a}/services", json={"services": [app_service("app", APP_PORT, name="A"), *manual]}),
       200)
    answer = get(server, a, APP_PORT, "/echo")
    assert answer.status_code == 200 and answer.json()["name"] == "A", answer.text  # the positive control
    return a, b


def assert_not_reached(answer: httpx.Response) -> None:
    """Neither the API's data, nor the host listener's nor the neighbour's bytes."""
    assert answer.status_code >= 400, answer.text
    assert b"neighbour secret" not in answer.content and b'"sandboxes"' not in answer.content
    assert answer.json()["success"] is False


def test_a_route_naming_the_api_port_a_host_port_or_a_neighbours_port_reaches_none_of_them(server, exposed, listener):
    a, _ = exposed
    for port in (server.port, listener.port, NEIGHBOUR_PORT):
        answer = get(server, a, port, "/api/v1/sandboxes")
        assert_not_reached(answer)
        assert answer.status_code == 502  # nothing listens on that port in A


@pytest.mark.parametrize("host", [
    "127.0.0.1--p{api}.localhost", "localhost--p{api}.localhost", "{b}--p0.localhost", "{a}--p99999.localhost",
    "{a}--p{api}.localhost", "{a}--p{neighbour}.localhost", "x--p{api}.localhost:{api}",
])
def test_no_host_name_reaches_the_api_or_another_sandbox(server, exposed, host):
    a, b = exposed
    name = host.format(a=a, b=b, api=server.port, neighbour=NEIGHBOUR_PORT)
    answer = httpx.get(f"{server.url}/api/v1/sandboxes", headers={"Host": name}, timeout=30)
    assert answer.status_code != 200 and b'"sandboxes"' not in answer.content
    assert b"neighbour secret" not in answer.content


def test_a_rewrite_changes_the_path_and_never_the_destination(server, http, exposed):
    a, _ = exposed
    routes = [{"id": "r1", "path_prefix": "/one", "rewrite_prefix": f"//127.0.0.1:{server.port}/api/v1/sandboxes"},
              {"id": "r2", "path_prefix": "/two", "rewrite_prefix": f"http://127.0.0.1:{server.port}/echo"},
              {"id": "r3", "path_prefix": "/three", "rewrite_prefix": "/../../../echo"}]
    ok(http.put(f"/api/v1/sandboxes/{a}/services", json={"services": [app_service("app", APP_PORT, routes, name="A")]}),
       200)
    for path in ("/one", "/two", "/three/x"):
        answer = get(server, a, APP_PORT, path)
        # A's own app answered (its 404 or its echo), whatever path the rewrite gave it.
        assert answer.headers.get("server", "").startswith("SimpleHTTP"), (path, answer.headers, answer.text)
        assert b'"sandboxes"' not in answer.content


def test_an_absolute_request_line_or_front_proxy_headers_do_not_redirect_a_request(server, exposed):
    a, b = exposed
    host = f"{a}--p{APP_PORT}.localhost:{server.port}"
    answer = raw_request(server, f"GET http://127.0.0.1:{server.port}/echo/abs HTTP/1.1\r\nHost: {host}\r\n"
                                 f"Connection: close\r\n\r\n".encode())
    assert b'"name": "A"' in answer and b"/echo/abs" in answer, answer[:300]
    spoofed = get(server, a, APP_PORT, "/echo", **{"X-Sandbox-ID": b, "X-Exposure-Port": str(NEIGHBOUR_PORT),
                                                 "X-Forwarded-Host": f"127.0.0.1:{server.port}"})
    assert spoofed.json()["name"] == "A"
    seen = {k.lower(): v for k, v in spoofed.json()["headers"].items()}
    assert "x-sandbox-id" not in seen and "x-exposure-port" not in seen
    assert seen["x-forwarded-host"] == host  # ours, not the client's
    # Without an exposure host those headers mean nothing: the API still wants its token.
    plain = httpx.get(f"{server.url}/echo", headers={"X-Sandbox-ID": a, "X-Exposure-Port": str(APP_PORT)})
    assert plain.status_code == 404 and b'"name"' not in plain.content


def test_the_path_form_cannot_climb_out_of_its_sandbox(server, exposed):
    a, b = exposed
    for tail in (f"/../../{b}/ingress/{NEIGHBOUR_PORT}/echo", f"/%2e%2e/%2e%2e/{b}/ingress/{NEIGHBOUR_PORT}/echo",
                 "/..%2f..%2fsessions"):
        # Sent as raw bytes: an HTTP client would resolve the dot segments itself.
        answer = raw_request(server, f"GET /api/v1/sandboxes/{a}/ingress/{APP_PORT}{tail} HTTP/1.1\r\n"
                                     f"Host: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        assert b"neighbour secret" not in answer and b'"sandboxes"' not in answer
        # A's own app answered (its 404: the path climbed no higher than A's root), or the
        # ingress refused the encoded slash.
        assert b"server: simplehttp" in answer.lower() or answer.startswith(b"HTTP/1.1 400"), answer[:200]


def test_the_host_stays_closed_to_the_sandbox_while_the_ingress_talks_to_it(server, http, exposed, listener):
    """The host accepts replies of its own connections into the sandbox, nothing the sandbox starts:
    not a listener on every host address, not the API port, not the very port the ingress's open
    connection comes from."""
    a, _ = exposed
    with httpx.Client(timeout=30) as keep_alive:
        first = keep_alive.get(f"{server.url}/api/v1/sandboxes/{a}/ingress/{APP_PORT}/echo")
        peer_address, peer_port = first.json()["peer"]
        gateway = gateway_of(server.data_dir, a)
        assert peer_address == gateway
        targets = [f"{gateway}:{listener.port}", f"{gateway}:{server.port}", f"{gateway}:{peer_port}",
                   f"127.0.0.1:{server.port}"]
        results = probe(http, a, *targets)
        opened = {t: r for t, r in results.items() if is_open(r)}
        assert not opened, f"the sandbox reached the host: {opened}"
        again = keep_alive.get(f"{server.url}/api/v1/sandboxes/{a}/ingress/{APP_PORT}/echo")
        assert again.status_code == 200  # and the ingress itself still works

"""Public service routes through the ingress, end to end: the official Python SDK sets the services,
real processes serve them inside real sandboxes (bwrap, own network namespace), and plain HTTP and
WebSocket clients on the host reach them by host name and by the path form."""
from __future__ import annotations

import hashlib
import socket
import time
from pathlib import Path

import httpx
import pytest
import websockets.sync.client as ws_client
from sandbox0.apispec.models.sandbox_app_service import SandboxAppService

from tests.helpers import TOKEN, ok

from .netlab import PYTHON

APP = (Path(__file__).parent.parent / "edges" / "sandbox_app.py").read_bytes()
ROUTE_TOKEN = "let-me-in"


def host_form(server, sandbox_id: str, port: int) -> tuple[str, dict]:
    return f"http://127.0.0.1:{server.port}", {"Host": f"{sandbox_id}--p{port}.localhost:{server.port}"}


def get(server, sandbox_id, port, path="/", timeout=30.0, **headers):
    base, host = host_form(server, sandbox_id, port)
    return httpx.get(base + path, headers={**host, **headers}, timeout=timeout)


def install_app(http, sandbox_id: str) -> None:
    ok(http.post(f"/api/v1/sandboxes/{sandbox_id}/files", params={"path": "/workspace/app.py"}, content=APP), 200)


def app_service(service_id: str, port: int, routes=None, name="app", **extra) -> dict:
    service = {"id": service_id, "port": port, "ingress": {"public": True, "routes": routes or []},
               "runtime": {"type": "cmd", "command": [PYTHON, "/workspace/app.py", str(port), name],
                           "cwd": "/workspace"}}
    service.update(extra)
    return service


@pytest.fixture
def sb(sandboxes, http):
    sandbox_id = sandboxes()
    install_app(http, sandbox_id)
    return sandbox_id


def test_an_http_server_started_as_a_cmd_service_answers_its_public_url(server, sdk, http, sandboxes):
    sandbox = sdk.sandboxes.sandbox(sandboxes())
    ok(http.post(f"/api/v1/sandboxes/{sandbox.id}/files", params={"path": "/workspace/hello.txt"},
                 content=b"hi"), 200)
    service = {"id": "web", "port": 8080, "ingress": {"public": True},
               "runtime": {"type": "cmd", "command": ["python3", "-m", "http.server", "8080"], "cwd": "/workspace"},
               "health_check": {"path": "/"}}
    [view] = sandbox.update_services([SandboxAppService.from_dict(service)]).services
    assert view.public_url == f"http://{sandbox.id}--p8080.localhost:{server.port}"
    answer = get(server, sandbox.id, 8080)  # the first request starts the session and waits for it
    assert answer.status_code == 200, answer.text
    assert "Directory listing" in answer.text and "hello.txt" in answer.text
    sessions = ok(http.get(f"/api/v1/sandboxes/{sandbox.id}/sessions"), 200)["sessions"]
    assert [s["spec"]["name"] for s in sessions] == ["sandbox-service:web"]
    path_form = httpx.get(f"{server.url}/api/v1/sandboxes/{sandbox.id}/ingress/8080/hello.txt", timeout=30)
    assert path_form.status_code == 200 and path_form.text == "hi"
    assert path_form.headers["content-security-policy"].startswith("sandbox")  # never the API's origin
    sandbox.clear_services()  # a removed service stops serving
    assert ok(http.get(f"/api/v1/sandboxes/{sandbox.id}/sessions"), 200)["sessions"] == []
    assert get(server, sandbox.id, 8080).status_code == 404


def test_bearer_auth_rate_limit_and_longest_prefix_apply_per_route(server, http, sb):
    digest = hashlib.sha256(ROUTE_TOKEN.encode()).hexdigest()
    routes = [{"id": "open", "path_prefix": "/"},
              {"id": "secret", "path_prefix": "/echo", "auth": {"mode": "bearer", "bearer_token_sha256": digest}},
              {"id": "slow", "path_prefix": "/echo/limited", "rate_limit": {"rps": 1, "burst": 2}}]
    ok(http.put(f"/api/v1/sandboxes/{sb}/services", json={"services": [app_service("app", 8081, routes)]}), 200)
    assert get(server, sb, 8081, "/").status_code == 200  # starts it
    refused = get(server, sb, 8081, "/echo")
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"
    assert get(server, sb, 8081, "/echo", Authorization="Bearer wrong").status_code == 401
    allowed = get(server, sb, 8081, "/echo", Authorization=f"Bearer {ROUTE_TOKEN}")
    assert allowed.status_code == 200
    assert "Authorization" not in allowed.json()["headers"]  # the route's credential stays here
    # The longest prefix wins: /echo/limited has no auth but a limit of 1 rps with a burst of 2.
    statuses = [get(server, sb, 8081, "/echo/limited").status_code for _ in range(3)]
    assert statuses[:2] == [200, 200] and statuses[2] == 429, statuses
    limited = get(server, sb, 8081, "/echo/limited")
    assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1
    assert get(server, sb, 8081, "/echoes").status_code == 200  # /echo is not a prefix of /echoes


def test_methods_cors_and_rewrite_follow_the_route(server, http, sb):
    routes = [{"id": "api", "path_prefix": "/v2", "rewrite_prefix": "/echo", "methods": ["GET"],
               "cors": {"allowed_origins": ["http://app.example"], "allowed_headers": ["x-token"],
                        "max_age_seconds": 60}}]
    ok(http.put(f"/api/v1/sandboxes/{sb}/services", json={"services": [app_service("app", 8082, routes)]}), 200)
    answer = get(server, sb, 8082, "/v2/items?x=1", Origin="http://app.example")
    assert answer.status_code == 200, answer.text
    assert answer.json()["path"] == "/echo/items?x=1"
    assert answer.headers["access-control-allow-origin"] == "http://app.example"
    base, host = host_form(server, sb, 8082)
    preflight = httpx.options(base + "/v2/items", headers={**host, "Origin": "http://app.example",
                                                           "Access-Control-Request-Method": "GET"})
    assert preflight.status_code == 204 and preflight.headers["access-control-max-age"] == "60"
    foreign = httpx.options(base + "/v2/items", headers={**host, "Origin": "http://evil.example",
                                                         "Access-Control-Request-Method": "GET"})
    assert foreign.status_code == 403
    assert httpx.post(base + "/v2/items", headers=host).status_code == 405
    assert get(server, sb, 8082, "/other").status_code == 404  # no route for it


def test_request_and_response_bodies_stream_through(server, http, sb):
    ok(http.put(f"/api/v1/sandboxes/{sb}/services", json={"services": [app_service("app", 8083)]}), 200)
    assert get(server, sb, 8083, "/echo").status_code == 200
    base, host = host_form(server, sb, 8083)

    def body():
        for _ in range(64):
            yield b"x" * 65536
    upload = httpx.post(base + "/upload", headers=host, content=body(), timeout=30)
    assert upload.json()["received"] == 64 * 65536
    arrivals = []
    with httpx.stream("GET", base + "/sse", headers=host, timeout=30) as stream:
        assert stream.headers["content-type"] == "text/event-stream"
        for line in stream.iter_lines():
            if line.startswith("data: tick"):
                arrivals.append(time.monotonic())
    assert len(arrivals) == 3
    assert arrivals[-1] - arrivals[0] > 0.4  # each event came when it was sent, not at the end


def test_a_websocket_echo_server_works_through_the_ingress(server, http, sb):
    ok(http.put(f"/api/v1/sandboxes/{sb}/services", json={"services": [app_service("app", 8084, name="ws")]}), 200)
    assert get(server, sb, 8084, "/echo").status_code == 200
    # The system resolver may not know *.localhost (browsers and curl resolve it themselves).
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    url = f"ws://{sb}--p8084.localhost:{server.port}/ws"
    with ws_client.connect(url, sock=sock, subprotocols=["echo.v1"], open_timeout=10) as conn:
        assert conn.subprotocol == "echo.v1"  # the service's choice, carried to the client
        conn.send("hello")
        assert conn.recv(timeout=10) == "ws: hello"
        conn.send(b"\x00\x01binary")
        assert conn.recv(timeout=10) == b"\x00\x01binary"
    path_form = f"ws://127.0.0.1:{server.port}/api/v1/sandboxes/{sb}/ingress/8084/ws"
    with ws_client.connect(path_form, open_timeout=10) as conn:
        conn.send("again")
        assert conn.recv(timeout=10) == "ws: again"


def test_a_resume_route_wakes_a_paused_sandbox_and_others_do_not(server, http, sb):
    routes = [{"id": "wake", "path_prefix": "/echo", "resume": True}, {"id": "sleepy", "path_prefix": "/"}]
    ok(http.put(f"/api/v1/sandboxes/{sb}/services", json={"services": [app_service("app", 8085, routes)]}), 200)
    assert get(server, sb, 8085, "/echo").status_code == 200
    ok(http.post(f"/api/v1/sandboxes/{sb}/pause", json={}), 200)
    sleeping = get(server, sb, 8085, "/")
    assert sleeping.status_code == 503 and "resume is disabled" in sleeping.json()["error"]["message"]
    woken = get(server, sb, 8085, "/echo", timeout=60)
    assert woken.status_code == 200, woken.text
    assert ok(http.get(f"/api/v1/sandboxes/{sb}"), 200)["status"] == "running"


def test_no_token_of_the_api_is_needed_and_none_is_accepted_in_its_place(server, http, sb):
    ok(http.put(f"/api/v1/sandboxes/{sb}/services", json={"services": [app_service("app", 8086)]}), 200)
    answer = get(server, sb, 8086, "/echo", Authorization=f"Bearer {TOKEN}")
    assert answer.status_code == 200 and answer.json()["name"] == "app"
    # The API itself still wants its token: an exposure host never stands in for it.
    assert httpx.get(f"{server.url}/api/v1/sandboxes").status_code == 401


def raw_request(server, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(request)
        chunks = []
        while True:
            data = sock.recv(65536)
            if not data:
                return b"".join(chunks)
            chunks.append(data)

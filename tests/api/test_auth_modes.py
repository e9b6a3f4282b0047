"""Who may call: the generated token on loopback, and ``--no-auth`` against browsers.

``--no-auth`` is attacked the way a web page would: a DNS-rebound name in ``Host``, a
cross-site ``text/plain`` POST (no CORS preflight needed) and a cross-site WebSocket
upgrade. Each must get 403 and change nothing; same-origin and non-browser calls work.
"""
from __future__ import annotations

import os
import subprocess
import sys

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect as ws_connect

from session_supervisor.client.local_server import resolve_token
from tests.client.test_cli import ROOT
from tests.helpers import claim_sandbox, create_session, spath
from tests.serverproc import ServerProcess

EVIL = "http://evil.example"


def sessionctl(server, *args, env=None) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SESSIOND_")}
    return subprocess.run([sys.executable, "-m", "session_supervisor.client.cli", "--url", server.url, *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, env={**clean, **(env or {})})


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    server = ServerProcess(tmp_path_factory.mktemp("token-data"), token=None).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def open_server(tmp_path_factory):
    server = ServerProcess(tmp_path_factory.mktemp("no-auth-data"), no_auth=True).start()
    yield server
    server.stop()


# ---- the generated token -----------------------------------------------------------------------
def test_sessionctl_on_the_same_machine_finds_the_token_file_without_sessiond_token(generated):
    assert httpx.get(f"{generated.url}/api/v1/sandboxes").status_code == 401
    by_env = sessionctl(generated, "sandbox", "claim", "-q", env={"SESSIOND_DATA_DIR": str(generated.data_dir)})
    assert by_env.returncode == 0, by_env.stderr
    by_flag = sessionctl(generated, "--data-dir", str(generated.data_dir), "sandbox", "delete", by_env.stdout.strip())
    assert by_flag.returncode == 0, by_flag.stderr
    elsewhere = sessionctl(generated, "sandbox", "list", env={"SESSIOND_DATA_DIR": str(generated.data_dir / "nope")})
    assert elsewhere.returncode == 6 and "unauthorized" in elsewhere.stderr


def test_the_token_file_is_only_read_for_a_loopback_url(tmp_path, monkeypatch):
    (tmp_path / "token").write_text("local-secret\n")
    monkeypatch.delenv("SESSIOND_TOKEN", raising=False)
    assert resolve_token(None, "http://127.0.0.1:8780", tmp_path) == "local-secret"
    assert resolve_token(None, "http://[::1]:8780", tmp_path) == "local-secret"
    assert resolve_token(None, "http://localhost:8780", tmp_path) == "local-secret"
    assert resolve_token(None, "http://sessiond.example.com:8780", tmp_path) == ""  # never sent away
    assert resolve_token("given", "http://127.0.0.1:8780", tmp_path) == "given"
    monkeypatch.setenv("SESSIOND_TOKEN", "from-env")
    assert resolve_token(None, "http://127.0.0.1:8780", tmp_path) == "from-env"


# ---- --no-auth against a web page ----------------------------------------------------------------
def sandbox_count(server) -> int:
    return httpx.get(f"{server.url}/api/v1/sandboxes").json()["data"]["count"]


def test_no_auth_refuses_a_foreign_host_header(open_server):
    rebound = httpx.get(f"{open_server.url}/api/v1/sandboxes", headers={"Host": "evil.example:8780"})
    assert rebound.status_code == 403 and rebound.json()["error"]["code"] == "forbidden"
    assert httpx.get(f"{open_server.url}/v1/sandboxes", headers={"Host": "evil.example"}).status_code == 403
    for host in (f"127.0.0.1:{open_server.port}", f"localhost:{open_server.port}"):
        assert httpx.get(f"{open_server.url}/api/v1/sandboxes", headers={"Host": host}).status_code == 200


def test_no_auth_refuses_a_cross_origin_text_plain_post_and_claims_nothing(open_server):
    before = sandbox_count(open_server)
    forged = httpx.post(f"{open_server.url}/api/v1/sandboxes", content='{"template":"default"}',
                        headers={"Origin": EVIL, "Content-Type": "text/plain"})
    assert forged.status_code == 403, forged.text
    null_origin = httpx.post(f"{open_server.url}/api/v1/sandboxes", content='{"template":"default"}',
                             headers={"Origin": "null", "Content-Type": "text/plain"})
    assert null_origin.status_code == 403  # a sandboxed iframe or a file:// page
    assert sandbox_count(open_server) == before
    same_origin = httpx.post(f"{open_server.url}/api/v1/sandboxes", json={"template": "default"},
                             headers={"Origin": open_server.url})
    assert same_origin.status_code == 201, same_origin.text
    httpx.delete(f"{open_server.url}/api/v1/sandboxes/{same_origin.json()['data']['sandbox_id']}")


def test_no_auth_refuses_a_foreign_origin_websocket_upgrade(open_server):
    with httpx.Client(base_url=open_server.url, timeout=30) as http:
        sb = claim_sandbox(http)
        sid = create_session(http, sb, {"command": ["/bin/cat"]})["id"]
        url = open_server.url.replace("http://", "ws://") + spath(sb, sid, "/ws")
        with pytest.raises(InvalidStatus) as refused:
            ws_connect(url, origin=EVIL, open_timeout=10).close()
        assert refused.value.response.status_code == 403
        with ws_connect(url, origin=open_server.url, open_timeout=10) as same_origin:
            assert same_origin.recv(10)  # the replay starts: the upgrade was accepted
        with ws_connect(url, open_timeout=10) as no_origin:  # a CLI or an SDK: no Origin at all
            assert no_origin.recv(10)
        http.delete(f"/api/v1/sandboxes/{sb}")


def test_no_auth_serves_the_cli_without_any_token(open_server):
    claimed = sessionctl(open_server, "sandbox", "claim", "-q")
    assert claimed.returncode == 0, claimed.stderr
    assert sessionctl(open_server, "sandbox", "delete", claimed.stdout.strip()).returncode == 0


@pytest.mark.parametrize("host,loopback", [
    ("127.0.0.1:8780", True), ("localhost", True), ("[::1]:8780", True), ("127.1.2.3", True),
    ("app.localhost:8780", True), ("LOCALHOST.", True),
    ("evil.example:8780", False), ("127.0.0.1.nip.io", False),  # rebinding names resolve to 127.0.0.1
    ("localtest.me", False), ("[::ffff:8.8.8.8]", False), ("0.0.0.0:8780", False), ("", False),
])
def test_only_loopback_names_and_addresses_pass_the_host_check(host, loopback):
    from session_supervisor.api.auth import _hostname
    from session_supervisor.client.local_server import is_loopback_host
    assert is_loopback_host(_hostname(host)) is loopback

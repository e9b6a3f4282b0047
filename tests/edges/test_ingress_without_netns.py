"""Without a network namespace per sandbox (``--runtime host`` or ``--network host``) a sandbox's
ports are the host's own: the ingress refuses rather than proxy into the host."""
from __future__ import annotations

import httpx

from tests.helpers import ok


def test_the_ingress_refuses_when_sandboxes_share_the_hosts_network(server, http, sandbox_id):
    service = {"id": "api", "port": server.port, "ingress": {"public": True}, "runtime": {"type": "manual"}}
    ok(http.put(f"/api/v1/sandboxes/{sandbox_id}/services", json={"services": [service]}), 200)
    for answer in (httpx.get(f"{server.url}/api/v1/sandboxes",
                             headers={"Host": f"{sandbox_id}--p{server.port}.localhost:{server.port}"}),
                   httpx.get(f"{server.url}/api/v1/sandboxes/{sandbox_id}/ingress/{server.port}/api/v1/sandboxes")):
        assert answer.status_code == 503, answer.text
        assert "needs a network namespace per sandbox" in answer.json()["error"]["message"]


def test_an_unknown_sandbox_or_an_unexposed_port_is_404(server, http, sandbox_id):
    unknown = httpx.get(f"{server.url}/", headers={"Host": f"sb-nope--p8080.localhost:{server.port}"})
    assert unknown.status_code == 404 and unknown.json()["error"]["message"] == "sandbox not found"
    assert httpx.get(f"{server.url}/_sessiond/ingress").status_code == 404  # only through a route

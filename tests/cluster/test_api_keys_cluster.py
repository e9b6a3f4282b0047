"""API keys with two nodes: they live in PostgreSQL, so a key made on one node works on the other at
once, a deactivation on one is refused by the other's next call, and team isolation holds for a
call that one node forwards to the other (HTTP and WebSocket)."""
from __future__ import annotations

import httpx
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect as ws_connect

from tests.helpers import create_session, ok

from .conftest import TOKEN


def http_for(url: str, token: str, team: str | None = None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}", **({"X-Team-ID": team} if team else {})}
    return httpx.Client(base_url=url, headers=headers, timeout=30.0)


def ws_status(url: str, token: str, path: str) -> int:
    try:
        with ws_connect("ws" + url.removeprefix("http") + path, additional_headers={
                "Authorization": f"Bearer {token}"}, open_timeout=10):
            return 101
    except InvalidStatus as refused:
        return refused.response.status_code


def test_keys_made_on_one_node_work_and_are_revoked_on_the_other(two_nodes):
    a, b = two_nodes
    with http_for(a.url, TOKEN) as admin_a:
        alpha = ok(admin_a.post("/teams", json={"name": "alpha", "home_region_id": "local"}), 201)["id"]
        beta = ok(admin_a.post("/teams", json={"name": "beta", "home_region_id": "local"}), 201)["id"]
        with http_for(a.url, TOKEN, alpha) as as_alpha, http_for(a.url, TOKEN, beta) as as_beta:
            dev = ok(as_alpha.post("/api-keys", json={"name": "dev", "roles": ["developer"]}), 201)
            outsider = ok(as_beta.post("/api-keys", json={"name": "other", "roles": ["developer"]}), 201)["key"]
    with http_for(b.url, TOKEN) as admin_b:
        assert {t["id"] for t in ok(admin_b.get("/teams"), 200)["teams"]} == {alpha, beta}

    with http_for(a.url, dev["key"]) as dev_a, http_for(b.url, dev["key"]) as dev_b:
        sandbox = ok(dev_a.post("/api/v1/sandboxes", json={"template": "default"}), 201)["sandbox_id"]  # runs on A
        session = create_session(dev_b, sandbox, {"command": ["/bin/cat"]})["id"]  # forwarded B -> A
        assert ok(dev_b.get(f"/api/v1/sandboxes/{sandbox}"), 200)["team_id"] == alpha
        assert sandbox in {s["id"] for s in ok(dev_b.get("/api/v1/sandboxes"), 200)["sandboxes"]}

        # The other team, through the node that does not run it: forwarded, and refused there.
        ws_path = f"/api/v1/sandboxes/{sandbox}/sessions/{session}/ws"
        with http_for(b.url, outsider) as other_b:
            assert other_b.get(f"/api/v1/sandboxes/{sandbox}/sessions/{session}/events").status_code == 404
            assert other_b.get(f"/api/v1/sandboxes/{sandbox}").status_code == 404
            assert sandbox not in {s["id"] for s in ok(other_b.get("/api/v1/sandboxes"), 200)["sandboxes"]}
        assert ws_status(b.url, outsider, ws_path) == 404
        assert ws_status(b.url, dev["key"], ws_path) == 101

        with http_for(b.url, TOKEN, alpha) as as_alpha_b:
            ok(as_alpha_b.post(f"/api-keys/{dev['id']}/deactivate"), 200)
        for node in (dev_a, dev_b):
            refused = node.get(f"/api/v1/sandboxes/{sandbox}")
            assert refused.status_code == 401 and refused.json()["error"]["message"] == "api key inactive"
    with http_for(b.url, TOKEN) as admin_b:
        ok(admin_b.delete(f"/api/v1/sandboxes/{sandbox}"), 202)

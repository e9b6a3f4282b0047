"""Keys, teams and a sandbox's team survive a restart; a store written before teams existed loads
with its sandboxes as the platform's own (no team key sees them)."""
from __future__ import annotations

import shutil
from pathlib import Path

import httpx

from tests.helpers import TOKEN, ok
from tests.serverproc import ServerProcess

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "store_before_one_package"


def http_for(url: str, token: str, team: str | None = None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}", **({"X-Team-ID": team} if team else {})}
    return httpx.Client(base_url=url, headers=headers, timeout=30.0)


def test_keys_teams_and_a_sandboxes_team_survive_a_restart(tmp_path):
    data = tmp_path / "data"
    with ServerProcess(data, token=TOKEN, runtime="host") as srv, http_for(srv.url, TOKEN) as admin:
        team = ok(admin.post("/teams", json={"name": "alpha", "home_region_id": "local"}), 201)["id"]
        with http_for(srv.url, TOKEN, team) as as_team:
            key = ok(as_team.post("/api-keys", json={"name": "ci", "roles": ["developer"]}), 201)
            gone = ok(as_team.post("/api-keys", json={"name": "old", "roles": ["viewer"]}), 201)
            ok(as_team.post(f"/api-keys/{gone['id']}/deactivate"), 200)
        with http_for(srv.url, key["key"]) as dev:
            sandbox = ok(dev.post("/api/v1/sandboxes", json={"template": "default"}), 201)["sandbox_id"]
            paused = ok(dev.post("/api/v1/sandboxes", json={"template": "default"}), 201)["sandbox_id"]
            ok(dev.post(f"/api/v1/sandboxes/{paused}/pause", json={"memory": False}), 200)  # a snapshot of it
    with ServerProcess(data, token=TOKEN, runtime="host") as srv:
        with http_for(srv.url, key["key"]) as dev:
            assert ok(dev.get(f"/api/v1/sandboxes/{sandbox}"), 200)["team_id"] == team
            ok(dev.post(f"/api/v1/sandboxes/{paused}/resume", json={"memory": False}), 200)
            assert ok(dev.get(f"/api/v1/sandboxes/{paused}"), 200)["team_id"] == team
        with http_for(srv.url, gone["key"]) as old:
            assert old.get("/api/v1/sandboxes").json()["error"]["message"] == "api key inactive"
        with http_for(srv.url, TOKEN) as admin:
            assert [t["id"] for t in ok(admin.get("/teams"), 200)["teams"]] == [team]
            assert ok(admin.get(f"/api/v1/sandboxes/{sandbox}/status"), 200)["team_id"] == team


def test_sandboxes_stored_before_teams_belong_to_no_team(tmp_path):
    data = tmp_path / "data"
    shutil.copytree(FIXTURE, data)
    sb, _sid = (data / "IDS").read_text().split()
    (data / "sandboxes" / sb / "workspace").mkdir(exist_ok=True)
    (data / "sandboxes" / sb / "tmp").mkdir(mode=0o1777, exist_ok=True)
    with ServerProcess(data, token=TOKEN, runtime="host") as srv, http_for(srv.url, TOKEN) as admin:
        assert ok(admin.get(f"/api/v1/sandboxes/{sb}"), 200)["team_id"] == "local"
        team = ok(admin.post("/teams", json={"name": "alpha", "home_region_id": "local"}), 201)["id"]
        with http_for(srv.url, TOKEN, team) as as_team:
            key = ok(as_team.post("/api-keys", json={"name": "ci", "roles": ["admin"]}), 201)["key"]
            assert ok(as_team.get("/api/v1/sandboxes"), 200)["count"] == 0
        with http_for(srv.url, key) as team_admin:
            assert team_admin.get(f"/api/v1/sandboxes/{sb}").status_code == 404
            assert ok(team_admin.get("/api/v1/sandboxes"), 200)["count"] == 0

"""Every route that names a sandbox, driven from the OpenAPI document, with the keys of two teams.

Another team's key gets 404 ``sandbox not found`` (the AeroLVM facade: ``{"error": "sandbox not
found"}``) on every such route, WebSockets included, before anything reaches the sandbox; a
viewer key gets 403 on every write and nothing else; lists, metrics and the facade's names see
only the caller's team. The routes come from the document, so a new route is covered as it lands.
"""
from __future__ import annotations

import re

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect as ws_connect

from session_supervisor.api.openapi import document
from tests.helpers import TOKEN, ok
from tests.serverproc import ServerProcess

FAKE_IDS = {"session_id": "ses-00000000-000", "context_id": "ctx-00000000", "key_id": ""}
METHODS = ("get", "put", "post", "delete")


def sandbox_routes() -> list[tuple[str, str, bool]]:
    """(METHOD, path template, is a WebSocket) of every documented route that names a sandbox."""
    out = []
    for path, item in document()["paths"].items():
        if "{sandbox_id}" not in path:
            continue
        for method in METHODS:
            if method in item:
                out.append((method.upper(), path, "101" in item[method]["responses"]))
    return out


ROUTES = sandbox_routes()


def fill(path: str, sandbox_id: str) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: sandbox_id if m[1] == "sandbox_id" else FAKE_IDS[m[1]], path)


def http_for(url: str, token: str, team: str | None = None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}"}
    if team:
        headers["X-Team-ID"] = team
    return httpx.Client(base_url=url, headers=headers, timeout=30.0)


def ws_status(url: str, token: str, path: str) -> int:
    """The HTTP status of a WebSocket handshake (101 when it opened)."""
    try:
        with ws_connect("ws" + url.removeprefix("http") + path, additional_headers={
                "Authorization": f"Bearer {token}"}, open_timeout=10):
            return 101
    except InvalidStatus as refused:
        return refused.response.status_code


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    with ServerProcess(tmp_path_factory.mktemp("teams-data"), token=TOKEN, runtime="host") as srv, \
            http_for(srv.url, TOKEN) as admin:
        keys = {}
        for team_name in ("alpha", "beta"):
            team = ok(admin.post("/teams", json={"name": team_name, "home_region_id": "local"}), 201)["id"]
            with http_for(srv.url, TOKEN, team) as as_team:
                for role in ("developer", "viewer", "builder", "admin"):
                    keys[team_name, role] = ok(as_team.post("/api-keys", json={
                        "name": f"{team_name}-{role}", "roles": [role]}), 201)["key"]
            keys[team_name] = team
        with http_for(srv.url, keys["alpha", "developer"]) as dev:
            sandbox = ok(dev.post("/api/v1/sandboxes", json={"template": "default"}), 201)["sandbox_id"]
            session = ok(dev.post(f"/api/v1/sandboxes/{sandbox}/sessions", json={"command": ["/bin/cat"]}), 201)
        yield {"url": srv.url, "keys": keys, "sandbox": sandbox, "session": session["id"]}


@pytest.mark.parametrize("method, path, websocket", ROUTES, ids=[f"{m} {p}" for m, p, _ in ROUTES])
def test_another_teams_key_finds_no_such_sandbox_on_any_route(world, method, path, websocket):
    target = fill(path, world["sandbox"])
    outsider = world["keys"]["beta", "developer"]
    if websocket:
        assert ws_status(world["url"], outsider, target) == 404
        return
    with http_for(world["url"], outsider) as http:
        response = http.request(method, target, json={} if method in ("POST", "PUT") else None)
    assert response.status_code == 404, response.text
    body = response.json()
    if path.startswith("/v1/"):
        assert body == {"error": "sandbox not found"}
    else:
        assert body["error"] == {"code": "not_found", "message": "sandbox not found"}


@pytest.mark.parametrize("method, path, websocket", ROUTES, ids=[f"{m} {p}" for m, p, _ in ROUTES])
def test_a_viewer_is_refused_every_write_and_no_read(world, method, path, websocket):
    target = fill(path, world["sandbox"])
    viewer = world["keys"]["alpha", "viewer"]
    writes = method != "GET" or (websocket and not path.endswith("/files/watch"))
    if websocket:
        status = ws_status(world["url"], viewer, target)
    else:
        with http_for(world["url"], viewer) as http:
            status = http.request(method, target, json={} if method in ("POST", "PUT") else None).status_code
    assert (status == 403) == writes, (method, path, status)


def test_the_owning_team_reaches_its_sandbox_on_every_read(world):
    with http_for(world["url"], world["keys"]["alpha", "viewer"]) as viewer:
        for method, path, websocket in ROUTES:
            if method != "GET" or websocket:
                continue
            response = viewer.get(fill(path, world["sandbox"]))
            assert "sandbox not found" not in response.text, (path, response.text)
        events = ok(viewer.get(f"/api/v1/sandboxes/{world['sandbox']}/sessions/{world['session']}/events"), 200)
        assert events["events"][0]["type"] == "session.created"


def test_lists_show_only_the_callers_team_and_the_platform_key_sees_every_team(world):
    sandbox = world["sandbox"]
    for token, seen in ((world["keys"]["alpha", "viewer"], True), (world["keys"]["beta", "developer"], False),
                        (TOKEN, True)):
        with http_for(world["url"], token) as http:
            listed = ok(http.get("/api/v1/sandboxes"), 200)["sandboxes"]
            aero = http.get("/v1/sandboxes").json()
        assert (sandbox in {s["id"] for s in listed}) is seen
        assert (sandbox in {s["id"] for s in aero}) is seen
    with http_for(world["url"], TOKEN, world["keys"]["beta"]) as platform_as_beta:
        assert sandbox not in {s["id"] for s in ok(platform_as_beta.get("/api/v1/sandboxes"), 200)["sandboxes"]}


def test_aerolvm_names_are_unique_within_a_team_only(world):
    made = []
    for team in ("alpha", "beta"):
        with http_for(world["url"], world["keys"][team, "developer"]) as http:
            created = http.post("/v1/sandboxes", json={"image": "ubuntu:22.04", "name": "shared-name"})
            assert created.status_code == 201, created.text
            made.append((team, created.json()["id"]))
            again = http.post("/v1/sandboxes", json={"image": "ubuntu:22.04", "name": "shared-name"})
            assert again.status_code == 409
    for team, sandbox in made:
        with http_for(world["url"], world["keys"][team, "developer"]) as http:
            assert http.delete(f"/v1/sandboxes/{sandbox}").status_code == 204


def test_metrics_for_a_team_key_name_only_its_sandboxes(world):
    with http_for(world["url"], world["keys"]["beta", "developer"]) as beta:
        theirs = ok(beta.post("/api/v1/sandboxes", json={"template": "default"}), 201)["sandbox_id"]
        beta_metrics = beta.get("/metrics").text
        with http_for(world["url"], TOKEN) as admin:
            every = admin.get("/metrics").text
        assert world["sandbox"] in every and theirs in every and "sessiond_http_responses" in every
        assert theirs in beta_metrics and world["sandbox"] not in beta_metrics
        assert "sessiond_http_responses" not in beta_metrics  # server-wide counts include other tenants
        assert beta.delete(f"/api/v1/sandboxes/{theirs}").status_code == 202


def test_a_builder_key_has_no_sandbox_access_at_all(world):
    with http_for(world["url"], world["keys"]["alpha", "builder"]) as builder:
        for response in (builder.get("/api/v1/sandboxes"), builder.post("/api/v1/sandboxes", json={
                "template": "default"}), builder.get(f"/api/v1/sandboxes/{world['sandbox']}"),
                builder.get("/v1/sandboxes"), builder.get("/metrics")):
            assert response.status_code == 403, response.text
        current = ok(builder.get("/api-keys/current"), 200)["api_key"]
        assert current["roles"] == ["builder"] and sorted(current["permissions"]) == ["registry:write",
                                                                                       "template:read"]


def test_team_selection_mistakes_are_refused(world):
    with http_for(world["url"], world["keys"]["alpha", "developer"], world["keys"]["beta"]) as wrong_team:
        assert wrong_team.get("/api/v1/sandboxes").status_code == 401
    with http_for(world["url"], TOKEN, "00000000-0000-4000-8000-000000000000") as unknown:
        refused = unknown.get("/api/v1/sandboxes")
        assert refused.status_code == 400 and refused.json()["error"]["code"] == "bad_request"


def test_a_team_admin_manages_its_own_teams_keys_only(world):
    with http_for(world["url"], world["keys"]["alpha", "admin"]) as admin:
        listed = ok(admin.get("/api-keys"), 200)["api_keys"]
        assert {k["name"] for k in listed} >= {"alpha-developer", "alpha-viewer"}
        assert not any(k["name"].startswith("beta-") for k in listed)
        made = ok(admin.post("/api-keys", json={"name": "short-lived", "roles": ["viewer"], "expires_in": "30d"}),
                  201)
        assert made["team_id"] == world["keys"]["alpha"]
        assert ok(admin.delete(f"/api-keys/{made['id']}"), 200) == {"message": "API key deleted"}
        assert admin.delete(f"/api-keys/{made['id']}").status_code == 404
        assert admin.post("/teams", json={"name": "mine"}).status_code == 403
    with http_for(world["url"], world["keys"]["alpha", "developer"]) as dev:
        assert dev.get("/api-keys").status_code == 403

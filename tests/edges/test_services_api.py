"""``GET``/``PUT …/services`` and ``config.services``, through the official Python SDK and raw HTTP."""
from __future__ import annotations

import hashlib

from sandbox0.apispec.models.sandbox_app_service import SandboxAppService
from sandbox0.apispec.models.sandbox_config import SandboxConfig

from tests.conftest import release_sandbox
from tests.helpers import err, ok

TOKEN_SHA = hashlib.sha256(b"route-token").hexdigest()
WEB = {"id": "web", "port": 8080, "ingress": {"public": True, "routes": [
    {"id": "web", "resume": True, "path_prefix": "/", "auth": {"mode": "bearer", "bearer_token_sha256": TOKEN_SHA},
     "rate_limit": {"rps": 5, "burst": 10}}]},
    "runtime": {"type": "cmd", "command": ["python3", "-m", "http.server", "8080"]}, "health_check": {"path": "/"}}


def test_the_sdk_updates_lists_and_clears_services(sdk, server):
    sb = sdk.sandboxes.claim("default")
    try:
        updated = sb.update_services([SandboxAppService.from_dict(WEB)])
        assert updated.sandbox_id == sb.id
        [view] = updated.services
        assert view.id == "web" and view.publishable is True and view.port == 8080
        assert view.public_url == f"http://{sb.id}--p8080.localhost:{server.port}"
        assert view.ingress.routes[0].resume is True
        assert view.ingress.routes[0].auth.to_dict()["bearer_token_sha256"] == TOKEN_SHA
        [again] = sb.get_services().services
        assert again.to_dict() == view.to_dict()
        assert sdk.sandboxes.get(sb.id).services[0].id == "web"  # GET sandbox shows them too
        assert sb.clear_services().services == []
        assert sb.get_services().services == []
    finally:
        sdk.sandboxes.delete(sb.id)


def test_services_set_at_claim_are_kept(sdk):
    sb = sdk.sandboxes.claim("default", config=SandboxConfig(services=[SandboxAppService.from_dict(WEB)]))
    try:
        assert [s.id for s in sb.get_services().services] == ["web"]
    finally:
        sdk.sandboxes.delete(sb.id)


def test_bad_services_get_400_and_leave_the_stored_list_alone(http, sandbox_id):
    path = f"/api/v1/sandboxes/{sandbox_id}/services"
    ok(http.put(path, json={"services": [WEB]}), 200)
    assert "services is required" in err(http.put(path, json={}), 400, "bad_request")["message"]
    bad = dict(WEB, port=0)
    assert "services[0]: port" in err(http.put(path, json={"services": [bad]}), 400, "bad_request")["message"]
    assert [s["id"] for s in ok(http.get(path), 200)["services"]] == ["web"]
    data = ok(http.get(path), 200)
    assert data["sandbox_id"] == sandbox_id and data["exposure_domain"] == "localhost"


def test_a_resume_route_needs_auto_resume_at_put_claim_and_update(http):
    config = {"auto_resume": False, "services": [WEB]}
    message = err(http.post("/api/v1/sandboxes", json={"template": "default", "config": config}), 400, "bad_request")
    assert "auto_resume is disabled" in message["message"]
    sb = ok(http.post("/api/v1/sandboxes", json={"template": "default", "config": {"services": [WEB]}}), 201)["sandbox_id"]
    try:
        refused = http.put(f"/api/v1/sandboxes/{sb}", json={"config": {"auto_resume": False}})
        assert "auto_resume is disabled" in err(refused, 400, "bad_request")["message"]
        ok(http.put(f"/api/v1/sandboxes/{sb}/services", json={"services": []}), 200)
        ok(http.put(f"/api/v1/sandboxes/{sb}", json={"config": {"auto_resume": False}}), 200)
        resumed = http.put(f"/api/v1/sandboxes/{sb}/services", json={"services": [WEB]})
        assert "auto_resume is disabled" in err(resumed, 400, "bad_request")["message"]
    finally:
        release_sandbox(http, sb)


def test_services_of_an_unknown_sandbox_are_404(http):
    err(http.get("/api/v1/sandboxes/sb-nope/services"), 404, "not_found")
    err(http.put("/api/v1/sandboxes/sb-nope/services", json={"services": []}), 404, "not_found")


def test_services_can_be_changed_while_paused_and_survive_the_resume(http, sandbox_id):
    path = f"/api/v1/sandboxes/{sandbox_id}/services"
    ok(http.post(f"/api/v1/sandboxes/{sandbox_id}/pause", json={}), 200)
    ok(http.put(path, json={"services": [WEB]}), 200)
    ok(http.post(f"/api/v1/sandboxes/{sandbox_id}/resume", json={}), 200)
    assert [s["id"] for s in ok(http.get(path), 200)["services"]] == ["web"]

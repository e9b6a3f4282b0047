"""The OpenAPI document: it validates, it lists exactly the app's routes, and it is what is served."""
from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
from openapi_spec_validator import validate

from session_supervisor.api.app import create_app
from session_supervisor.api.openapi import document

HTTP_METHODS = {"get", "put", "post", "delete", "patch", "head", "options"}


CONSOLE_PREFIX = "/ui"  # the browser console's static files (api/routes/ui.py): pages, not API
CONSOLE_REDIRECTS = {"/", "/favicon.ico"}  # what a browser asks of the bare address, sent to /ui/


def app_routes() -> set[tuple[str, str]]:
    """(METHOD, /path/{}) for every API route the Sanic app registers."""
    container = SimpleNamespace(settings=SimpleNamespace(token="x"), observers=[])
    app = create_app(container, name="openapi_drift_probe")
    app.router.finalize()
    routes = set()
    for route in app.router.routes:
        path = "/" + route.path.strip("/")
        path = re.sub(r"<[^>]+>", "{}", path)
        if path == CONSOLE_PREFIX or path.startswith(CONSOLE_PREFIX + "/") or path in CONSOLE_REDIRECTS:
            continue
        routes |= {(method.upper(), path) for method in route.methods}
    return routes


def document_routes() -> set[tuple[str, str]]:
    return {(method.upper(), re.sub(r"\{[^}]+\}", "{}", path))
            for path, item in document()["paths"].items() for method in item if method in HTTP_METHODS}


def test_the_document_is_valid_openapi_3_1():
    doc = document()
    assert doc["openapi"].startswith("3.1")
    validate(doc)


def test_the_document_lists_exactly_the_routes_the_app_registers():
    in_app, in_doc = app_routes(), document_routes()
    assert not in_app - in_doc, f"routes missing from the OpenAPI document: {sorted(in_app - in_doc)}"
    assert not in_doc - in_app, f"documented routes the app does not serve: {sorted(in_doc - in_app)}"


def test_every_operation_documents_its_success_and_error_envelopes():
    doc = document()
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if method not in HTTP_METHODS:
                continue
            statuses = set(op["responses"])
            assert any(s.startswith(("1", "2")) for s in statuses), (method, path)
            if path in ("/healthz", "/health"):  # liveness needs no token
                continue
            assert "401" in statuses, f"{method} {path} does not document the 401 envelope"
            error = op["responses"]["401"]["content"]["application/json"]["schema"]["$ref"]
            assert error.endswith("/AeroError" if path.startswith("/v1/") else "/ErrorEnvelope"), (method, path)


def test_the_served_document_is_the_generated_one_and_needs_the_token(server, http):
    served = http.get("/api/v1/openapi.json")
    assert served.status_code == 200, served.text
    assert served.json() == document()
    anonymous = http.get("/api/v1/openapi.json", headers={"Authorization": ""})
    assert anonymous.status_code == 401
    assert anonymous.json()["error"]["code"] == "unauthorized"


@pytest.mark.parametrize("name", ["Session", "Event", "EventPage", "InputResponse", "Sandbox", "ClaimResponse"])
def test_the_contract_resources_have_their_required_fields(name):
    required = set(document()["components"]["schemas"][name].get("required", []))
    expected = {
        "Session": {"id", "spec", "spec_version", "phase", "runtime_generation", "restart_count", "cursor",
                    "created_at", "updated_at", "last_activity_at"},
        "Event": {"seq", "session_id", "runtime_generation", "type", "occurred_at"},
        "EventPage": {"events", "cursor"},
        "InputResponse": {"input_id", "attempt_id", "accepted", "duplicate"},
        # pod_name and both deadlines: what the Go SDK requires besides Python's fields.
        "Sandbox": {"id", "template_id", "team_id", "status", "paused", "auto_resume", "runtime_id", "pod_name",
                    "runtime_generation", "claimed_at", "created_at", "updated_at", "expires_at", "hard_expires_at"},
        "ClaimResponse": {"sandbox_id", "status", "runtime_id", "pod_name", "template"},
    }[name]
    assert required == expected

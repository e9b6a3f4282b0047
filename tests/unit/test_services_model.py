"""The services list as the contract normalizes it (reference ``appservice/normalize.go``)."""
from __future__ import annotations

import hashlib

import pytest

from session_supervisor.domain.model.service_session import check_runnable, session_spec
from session_supervisor.domain.model.services import (
    ServicesError,
    check_resume_allowed,
    normalize_services,
    publish_blockers,
    service_view,
)

DIGEST = hashlib.sha256(b"secret").hexdigest()


def web(**overrides):
    service = {"id": "Web", "port": 8080, "ingress": {"public": True},
               "runtime": {"type": "cmd", "command": ["python3", "-m", "http.server", "8080"]}}
    service.update(overrides)
    return service


def test_a_public_service_without_routes_gets_one_route_for_everything():
    [service] = normalize_services([web()])
    assert service["id"] == "web"
    assert service["ingress"] == {"public": True, "routes": [{"id": "web", "resume": False, "path_prefix": "/"}]}


def test_routes_are_normalized_the_reference_way():
    [service] = normalize_services([web(ingress={"public": True, "routes": [
        {"id": " API ", "path_prefix": "api", "methods": ["get", "GET", "post"], "rewrite_prefix": "",
         "auth": {"mode": "Bearer", "bearer_token_sha256": DIGEST.upper()},
         "cors": {"allowed_origins": ["HTTP://Example.com/"], "allowed_headers": ["x-token"]},
         "rate_limit": {"rps": 1, "burst": 2}, "timeout_seconds": 5}]})])
    route = service["ingress"]["routes"][0]
    assert route == {"id": "api", "resume": False, "path_prefix": "/api", "methods": ["GET", "POST"],
                     "rewrite_prefix": "/", "auth": {"mode": "bearer", "bearer_token_sha256": DIGEST},
                     "cors": {"allowed_origins": ["http://Example.com"], "allowed_headers": ["X-Token"]},
                     "rate_limit": {"rps": 1, "burst": 2}, "timeout_seconds": 5}


@pytest.mark.parametrize("change, message", [
    ({"id": "not a label"}, "id must be a DNS label"),
    ({"ingress": None}, "ingress is required"),
    ({"port": 0}, "port must be between 1 and 65535"),
    ({"port": 70000}, "port must be between 1 and 65535"),
    ({"port": 49983}, "reserved for function services"),
    ({"port": "8080"}, "port must be an integer"),
    ({"runtime": {"type": "cmd"}}, "runtime.command is required"),
    ({"runtime": {"command": ["x"]}}, "runtime.type is required"),
    ({"runtime": {"type": "function"}}, "function is not supported"),
    ({"runtime": {"type": "docker"}}, "runtime.type must be one of"),
    ({"ingress": {"public": True, "routes": [{"id": "r", "auth": {"mode": "bearer"}}]}}, "bearer_token_sha256 is required"),
    ({"ingress": {"public": True, "routes": [{"id": "r", "auth": {"mode": "bearer", "bearer_token_sha256": "abc"}}]}},
     "hex encoded SHA-256"),
    ({"ingress": {"public": True, "routes": [{"id": "r", "auth": {"mode": "header", "header_name": "bad name",
                                                                  "header_value_sha256": DIGEST}}]}}, "valid HTTP header name"),
    ({"ingress": {"public": True, "routes": [{"id": "r", "auth": {"mode": "magic"}}]}}, "unsupported auth.mode"),
    ({"ingress": {"public": True, "routes": [{"id": "r", "rate_limit": {"rps": 0, "burst": 1}}]}}, "rps must be greater than 0"),
    ({"ingress": {"public": True, "routes": [{"id": "r", "rate_limit": {"rps": 1}}]}}, "burst must be greater than 0"),
    ({"ingress": {"public": True, "routes": [{"id": "r", "timeout_seconds": -1}]}}, "timeout_seconds"),
    ({"ingress": {"public": True, "routes": [{"id": "r", "methods": ["G E T"]}]}}, "invalid method"),
    ({"ingress": {"public": True, "routes": [{"id": "r", "cors": {"allowed_origins": ["ftp://x"]}}]}}, "invalid origin"),
    ({"ingress": {"public": True, "routes": [{"id": "r", "cors": {"max_age_seconds": -5}}]}}, "max_age_seconds"),
    ({"ingress": {"public": True, "routes": [{"id": "r"}, {"id": "R"}]}}, "duplicate id 'r'"),
    ({"ingress": {"public": True, "routes": [{"id": f"r{i}"} for i in range(33)]}}, "exceeds limit 32"),
    ({"ingress": {"public": True, "routes": [{"id": "r", "path_prefix": "/a b"}]}}, "spaces or control"),
])
def test_invalid_services_are_refused_with_the_field_named(change, message):
    with pytest.raises(ServicesError, match=message):
        normalize_services([web(**change)])


def test_two_services_may_not_share_an_id():
    with pytest.raises(ServicesError, match=r"services\[1\]: duplicate id 'web'"):
        normalize_services([web(), web(port=9090)])


def test_a_resume_route_needs_a_cmd_runtime_and_auto_resume():
    manual = web(runtime={"type": "manual"}, ingress={"public": True, "routes": [{"id": "r", "resume": True}]})
    with pytest.raises(ServicesError, match="resume requires runtime.type cmd"):
        normalize_services([manual])
    services = normalize_services([web(ingress={"public": True, "routes": [{"id": "r", "resume": True}]})])
    check_resume_allowed(services, auto_resume=True)
    with pytest.raises(ServicesError, match="auto_resume is disabled"):
        check_resume_allowed(services, auto_resume=False)


def test_the_view_says_what_blocks_publishing_and_where_the_service_is():
    [private] = normalize_services([web(id="db", runtime={"type": "manual"}, ingress={"public": False})])
    assert publish_blockers(private) == ["not_public", "manual_runtime"]
    view = service_view(private, "http://sb-1--p8080.localhost:8780")
    assert view["publishable"] is False and "public_url" not in view
    [public] = normalize_services([web()])
    view = service_view(public, "http://sb-1--p8080.localhost:8780")
    assert view["publishable"] is True and "publish_blockers" not in view
    assert view["public_url"] == "http://sb-1--p8080.localhost:8780"


def test_a_cmd_service_runs_as_a_session_named_after_it():
    [service] = normalize_services([web(runtime={"type": "cmd", "command": ["app"], "cwd": "/workspace/site",
                                                 "env_vars": {"MODE": "x"}})])
    spec = session_spec(service)
    assert spec["name"] == "sandbox-service:web" and spec["command"] == ["app"] and spec["cwd"] == "/workspace/site"
    assert spec["env"] == {"MODE": "x", "SANDBOX0_SERVICE_ID": "web", "SANDBOX0_SERVICE_PORT": "8080",
                           "SANDBOX0_SERVICE_RUNTIME": "cmd"}
    assert spec["io"]["mode"] == "pipes" and spec["lifecycle"]["restart"]["policy"] == "on_failure"
    assert spec["lifecycle"]["runtime_recovery"] == "restart"


def test_a_command_a_session_could_not_run_is_refused_up_front():
    services = normalize_services([web(runtime={"type": "cmd", "command": ["a\x00b"]})])
    with pytest.raises(ServicesError, match="NUL"):
        check_runnable(services)

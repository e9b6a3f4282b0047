"""OpenAPI entries for a sandbox's edges: services, observability and metrics (environments
contract §4-§5). The ingress itself (exposure hosts and the path form) is a proxy, not an API
operation: docs/edges.md describes it."""
from __future__ import annotations

from .openapi_schemas import BOOL, INT32, STR, STR_MAP, array, enum, obj, ref

SB = "/api/v1/sandboxes/{sandbox_id}"
_PORT = {"type": "integer", "minimum": 1, "maximum": 65535}

SCHEMAS = {
    "SandboxAppServiceRoute": obj({
        "id": STR, "resume": BOOL, "path_prefix": STR, "methods": array(STR, maxItems=16),
        "rewrite_prefix": STR,
        "auth": obj({"mode": enum("none", "bearer", "header"), "bearer_token_sha256": STR, "header_name": STR,
                     "header_value_sha256": STR}, ("mode",)),
        "cors": obj({"allowed_origins": array(STR), "allowed_methods": array(STR), "allowed_headers": array(STR),
                     "expose_headers": array(STR), "allow_credentials": BOOL, "max_age_seconds": INT32}),
        "rate_limit": obj({"rps": INT32, "burst": INT32}, ("rps", "burst")), "timeout_seconds": INT32},
        ("id", "resume")),
    "SandboxAppService": obj({
        "id": STR, "display_name": STR, "port": _PORT,
        "ingress": obj({"public": BOOL, "routes": array(ref("SandboxAppServiceRoute"), maxItems=32)}),
        "runtime": obj({"type": enum("manual", "cmd"), "command": array(STR), "cwd": STR, "env_vars": STR_MAP},
                       ("type",)),
        "health_check": obj({"path": STR})}, ("id", "ingress")),
    "SandboxAppServiceView": {"allOf": [ref("SandboxAppService"), obj({
        "publishable": BOOL, "publish_blockers": array(enum("not_public", "missing_runtime", "manual_runtime",
                                                            "missing_command", "missing_function")),
        "public_url": STR}, ("publishable",))]},
    "SandboxServicesUpdateRequest": obj({"services": array(ref("SandboxAppService"))}, ("services",)),
    "SandboxServices": obj({"sandbox_id": STR, "services": array(ref("SandboxAppServiceView")),
                            "exposure_domain": STR}, ("sandbox_id", "services")),
}


def edge_paths(operation) -> dict:
    """``operation`` is openapi.py's builder (passed in: no import cycle)."""
    s = {"tag": "services"}
    return {
        SB + "/services": {
            "get": operation("get_sandbox_services", "The sandbox's services with their public URLs",
                             {200: ref("SandboxServices")}, (401, 404), **s),
            "put": operation("update_sandbox_services", "Replace the services ([] clears them)",
                             {200: ref("SandboxServices")}, (400, 401, 404, 503), "SandboxServicesUpdateRequest",
                             **s)},
    }




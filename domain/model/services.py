"""A sandbox's app services (Sandbox0 ``SandboxAppService``): validation, normal form and view.

A service names a port of its sandbox that the ingress may reach (``ingress.public`` with
routes), and optionally how the process behind it runs: ``cmd`` (a supervised session the
ingress starts on the first request) or ``manual`` (proxy only; the tenant starts it). The
normal form is what ``config.services`` stores and ``GET …/services`` returns; the view adds
``publishable``, ``publish_blockers`` and ``public_url``.

The rules are the reference's (``appservice/normalize.go``): lower-cased DNS-label ids, at most
32 routes of 16 methods, SHA-256 hex digests for route credentials, origins as
``scheme://host[:port]``. ``function`` services need the reference's in-sandbox function daemon,
which this server does not have: they are refused (400) rather than stored and never served.
"""
from __future__ import annotations

from .errors import InvalidSpecError
from .service_routes import (  # noqa: F401  (ServicesError is raised from here too)
    ServicesError,
    bool_field,
    int_field,
    label_field,
    object_field,
    prefix_field,
    text_field,
    normalize_route,
)
from .spec import check_env

MAX_SERVICES = 64
MAX_ROUTES = 32
FUNCTION_PORT = 49983  # the reference's function daemon port: never a tenant's service port
MANUAL, CMD, FUNCTION = "manual", "cmd", "function"


def normalize_services(raw) -> list[dict]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ServicesError("services must be an array")
    if len(raw) > MAX_SERVICES:
        raise ServicesError(f"services exceeds limit {MAX_SERVICES}")
    out, seen = [], set()
    for i, item in enumerate(raw):
        try:
            service = _service(item)
        except ServicesError as exc:
            raise ServicesError(f"services[{i}]: {exc}") from None
        if service["id"] in seen:
            raise ServicesError(f"services[{i}]: duplicate id {service['id']!r}")
        seen.add(service["id"])
        out.append(service)
    return out


def check_resume_allowed(services: list[dict], auto_resume: bool) -> None:
    """A public route that wakes the sandbox needs the sandbox to allow waking (400)."""
    if auto_resume:
        return
    for service in services:
        if service["ingress"]["public"] and any(r["resume"] for r in service["ingress"]["routes"]):
            raise ServicesError("cannot set resume=true on public routes when sandbox auto_resume is disabled")


def _service(raw) -> dict:
    raw = object_field(raw, "service")
    service_id = label_field(raw.get("id"), "id")
    if raw.get("ingress") is None:
        raise ServicesError("ingress is required")
    ingress = object_field(raw["ingress"], "ingress")
    out: dict = {"id": service_id}
    if raw.get("display_name") is not None:
        out["display_name"] = text_field(raw["display_name"], "display_name").strip()
    runtime = _runtime(raw["runtime"]) if raw.get("runtime") is not None else None
    kind = runtime["type"] if runtime else MANUAL
    port = raw.get("port")
    if kind == FUNCTION:
        raise ServicesError("runtime.type function is not supported by this server (use cmd or manual)")
    port = int_field(port, "port") if port is not None else 0
    if not 1 <= port <= 65535:
        raise ServicesError("port must be between 1 and 65535")
    if port == FUNCTION_PORT:
        raise ServicesError(f"port {FUNCTION_PORT} is reserved for function services")
    out["port"] = port
    public = bool_field(ingress.get("public"), "ingress.public", False)
    routes = ingress.get("routes")
    if routes is None:
        routes = []
    if not isinstance(routes, list):
        raise ServicesError("ingress.routes must be an array")
    if public and not routes:
        routes = [{"id": service_id, "path_prefix": "/"}]
    if len(routes) > MAX_ROUTES:
        raise ServicesError(f"ingress.routes exceeds limit {MAX_ROUTES}")
    normalized, seen = [], set()
    for i, item in enumerate(routes):
        try:
            route = normalize_route(item)
        except ServicesError as exc:
            raise ServicesError(f"ingress.routes[{i}]: {exc}") from None
        if route["id"] in seen:
            raise ServicesError(f"ingress.routes[{i}]: duplicate id {route['id']!r}")
        if public and route["resume"] and kind != CMD:
            raise ServicesError(f"ingress.routes[{i}]: resume requires runtime.type cmd or function")
        seen.add(route["id"])
        normalized.append(route)
    out["ingress"] = {"public": public, "routes": normalized}
    if runtime is not None:
        out["runtime"] = runtime
    if raw.get("health_check") is not None:
        health = object_field(raw["health_check"], "health_check")
        out["health_check"] = {"path": prefix_field(health.get("path"), "health_check.path")}
    return out


def _runtime(raw) -> dict:
    raw = object_field(raw, "runtime")
    if raw.get("type") is None:
        raise ServicesError("runtime.type is required")
    kind = text_field(raw["type"], "runtime.type").strip().lower() or MANUAL
    if kind not in (MANUAL, CMD, FUNCTION):
        raise ServicesError("runtime.type must be one of: cmd, manual, function")
    out: dict = {"type": kind}
    command = raw.get("command")
    if command is not None:
        if not isinstance(command, list) or not all(isinstance(a, str) for a in command):
            raise ServicesError("runtime.command must be an array of strings")
        if command:
            out["command"] = list(command)
    if kind == CMD and not out.get("command"):
        raise ServicesError("runtime.command is required for cmd services")
    if raw.get("cwd") is not None:
        cwd = text_field(raw["cwd"], "runtime.cwd").strip()
        if cwd:
            out["cwd"] = cwd
    env = raw.get("env_vars")
    if env is not None:
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            raise ServicesError("runtime.env_vars must be an object of strings")
        try:
            check_env(env, "runtime.env_vars")
        except InvalidSpecError as exc:
            raise ServicesError(exc.message) from None
        if env:
            out["env_vars"] = dict(env)
    return out


# ---- the view ------------------------------------------------------------------------------------
def host_label(sandbox_id: str, port: int) -> str:
    """The exposure host's first label, ``<sandbox_id>--p<port>`` (a DNS label: at most 63)."""
    return f"{sandbox_id}--p{port}"


def publish_blockers(service: dict) -> list[str]:
    blockers = []
    if not service["ingress"]["public"] or not service["ingress"]["routes"]:
        blockers.append("not_public")
    runtime = service.get("runtime")
    if runtime is None:
        blockers.append("missing_runtime")
    elif runtime["type"] == MANUAL:
        blockers.append("manual_runtime")
    elif runtime["type"] == CMD and not runtime.get("command"):
        blockers.append("missing_command")
    return blockers


def service_view(service: dict, public_url: str | None) -> dict:
    """``SandboxAppServiceView``: the service as stored, its publishability and its URL."""
    view = dict(service)
    blockers = publish_blockers(service)
    view["publishable"] = not blockers
    if blockers:
        view["publish_blockers"] = blockers
    if public_url and service["ingress"]["public"]:
        view["public_url"] = public_url
    return view

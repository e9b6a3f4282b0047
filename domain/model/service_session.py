"""The session behind a ``cmd`` service: its name, idempotency key and spec (pure).

The ingress starts a ``cmd`` service on its first request as an ordinary supervised session, so
it has a journal, restarts on failure and comes back after a pause or a server restart like any
other session. Its spec is derived from the service alone; when the service changes the spec
drifts, and the ingress replaces the session's spec on the next request.
"""
from __future__ import annotations

from .errors import InvalidSpecError
from .services import ServicesError
from .spec import normalize_spec

SESSION_PREFIX = "sandbox-service:"
KEY_PREFIX = "sandbox-service-runtime:"


def session_name(service_id: str) -> str:
    return SESSION_PREFIX + service_id


def idempotency_key(service_id: str) -> str:
    return KEY_PREFIX + service_id


def session_spec(service: dict) -> dict:
    """The normalized session spec of a ``cmd`` service (raises ServicesError when it is not one
    a session could run, e.g. a command over the session limits)."""
    runtime = service.get("runtime") or {}
    env = dict(runtime.get("env_vars") or {})
    env.update({"SANDBOX0_SERVICE_ID": service["id"], "SANDBOX0_SERVICE_PORT": str(service["port"]),
                "SANDBOX0_SERVICE_RUNTIME": "cmd"})
    raw = {"name": session_name(service["id"]), "command": runtime.get("command"), "env": env,
           "io": {"mode": "pipes"},
           "lifecycle": {"desired_state": "running", "restart": {"policy": "on_failure"},
                         "runtime_recovery": "restart"}}
    if runtime.get("cwd"):
        raw["cwd"] = runtime["cwd"]
    try:
        return normalize_spec(raw)
    except InvalidSpecError as exc:
        raise ServicesError(f"runtime: {exc.message}") from None


def check_runnable(services: list[dict]) -> None:
    """Every ``cmd`` service's session spec is valid (PUT answers 400 now, not the first request)."""
    for i, service in enumerate(services):
        if (service.get("runtime") or {}).get("type") == "cmd":
            try:
                session_spec(service)
            except ServicesError as exc:
                raise ServicesError(f"services[{i}]: {exc}") from None

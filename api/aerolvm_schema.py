"""Shapes of the AeroLVM facade: request parsing and rendering.

An AeroLVM session is an ordinary supervised session: creation is translated into a
Sandbox0 spec (restart ``never``, the default) and rendering reads the same aggregate
the Sandbox0 API renders, so every session is visible in both APIs. Optional fields
are omitted rather than sent as null or as Go zero values.
"""
from __future__ import annotations

from typing import Any

from session_supervisor.domain.model.errors import InvalidRequestError
from session_supervisor.domain.model.json_fields import body_object, optional_str
from session_supervisor.domain.model.signals import signal_short_name
from session_supervisor.domain.model.timefmt import rfc3339

# No argv and no command: a login shell, bash when the sandbox has it (as upstream).
LOGIN_SHELL = ["sh", "-c", "if command -v bash >/dev/null 2>&1; then exec bash -l; fi; exec sh -l"]
RESTING_PHASES = frozenset({"exited", "failed", "stopped"})


def _string_map(body: dict, key: str) -> dict[str, str]:
    value = body_object(body.get(key), key)
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise InvalidRequestError(f"{key} must be an object of strings")
    return dict(value)


def _size(value: Any, default: int) -> Any:
    # Upstream falls back to 80x24 when a size is absent or <= 0; other types are left
    # to the spec validation, which rejects them with a 400.
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value <= 0):
        return default
    return value


def create_session_spec(body: Any) -> dict:
    """POST /v1/sandboxes/{id}/sessions body -> a raw Sandbox0 spec (argv wins over command)."""
    body = body_object(body)
    argv = body.get("argv")
    if argv is not None and (not isinstance(argv, list) or not all(isinstance(a, str) for a in argv)):
        raise InvalidRequestError("argv must be an array of strings")
    command = optional_str(body, "command")
    if argv:
        argv_out = list(argv)
    elif command.strip():
        argv_out = ["sh", "-c", command]
    else:
        argv_out = list(LOGIN_SHELL)
    pty = body.get("pty")
    if pty is not None and not isinstance(pty, bool):
        raise InvalidRequestError("pty must be a boolean")
    spec: dict[str, Any] = {"command": argv_out, "io": {"mode": "pty" if pty else "pipes"}}
    if pty:
        spec["io"]["terminal"] = {"rows": _size(body.get("rows"), 24), "cols": _size(body.get("cols"), 80)}
    name = optional_str(body, "name").strip()
    if name:
        spec["name"] = name
    workdir = optional_str(body, "workdir") or optional_str(body, "workDir")
    if workdir:
        spec["cwd"] = workdir
    env = _string_map(body, "env")
    if env:
        spec["env"] = env
    return spec


def is_finished(session) -> bool:
    """Nothing runs and nothing will restart on its own: the attach exit point."""
    return session.phase in RESTING_PHASES


def exit_info(session) -> dict:
    """{"code": N} plus "signal" (short name) when a signal ended the latest attempt.

    An attempt that never exited normally (start failure, runtime replaced) reports -1.
    """
    attempt = session.attempt
    if attempt is None:
        return {"code": 0}
    info: dict[str, Any] = {"code": attempt.get("exit_code", -1)}
    if "signal" in attempt:
        info["signal"] = signal_short_name(attempt["signal"])
    return info


def session_status(session) -> str:
    if session.phase == "pending":
        return "pending"  # created with desired state stopped: nothing started yet
    if not is_finished(session):
        return "running"
    attempt = session.attempt
    if attempt is None:
        return "exited"
    if attempt.get("reason") == "start_failed":
        return "failed"
    if "signal" in attempt or attempt.get("exit_code", -1) == -1:
        return "killed"
    return "exited"


def render_session(session, attached: int) -> dict:
    spec = session.spec
    attempt = session.attempt or {}
    out: dict[str, Any] = {"id": session.id, "name": spec.get("name", ""), "argv": list(spec["command"])}
    if spec.get("cwd"):
        out["workdir"] = spec["cwd"]
    status = session_status(session)
    out["pty"] = session.is_pty
    out["status"] = status
    info = exit_info(session) if is_finished(session) else {"code": 0}
    out["exit_code"] = info["code"]
    if "signal" in info:
        out["exit_signal"] = info["signal"]
    out["created_at"] = rfc3339(session.created_ns)
    out["started_at"] = rfc3339(attempt.get("started_ns", session.created_ns))
    if is_finished(session) and "finished_ns" in attempt:
        out["exited_at"] = rfc3339(attempt["finished_ns"])
    out["recording"] = False
    out["attached"] = attached
    return out


# ---- sandboxes ---------------------------------------------------------------------------
def create_sandbox_config(body: Any) -> tuple[str, dict]:
    """POST /v1/sandboxes body -> (name, our sandbox config). Unknown keys are ignored."""
    body = body_object(body)
    image = body.get("image")
    if not isinstance(image, str) or not image.strip():
        raise InvalidRequestError("image is required")
    name = optional_str(body, "name").strip()
    config: dict[str, Any] = {"aerolvm": {"name": name, "image": image.strip(),
                                          "tags": _string_map(body, "tags")}}
    env = _string_map(body, "env")
    if env:
        config["env_vars"] = env
    return name, config


def sandbox_facts(sandbox) -> dict:
    return (sandbox.config or {}).get("aerolvm") or {}


def render_sandbox(sandbox, include_env: bool = False) -> dict:
    facts = sandbox_facts(sandbox)
    out: dict[str, Any] = {"id": sandbox.id, "name": facts.get("name", ""), "tags": facts.get("tags", {})}
    if facts.get("image"):
        out["image"] = facts["image"]
    out["status"] = "stopped" if sandbox.status == "paused" else sandbox.status
    out["created_at"] = rfc3339(sandbox.created_ns)
    out["updated_at"] = rfc3339(sandbox.updated_ns)
    if include_env:
        out["env"] = dict(sandbox.config.get("env_vars") or {})
    return out


def sandbox_matches(sandbox, name: str, tags: dict[str, str]) -> bool:
    facts = sandbox_facts(sandbox)
    if name and facts.get("name") != name:
        return False
    have = facts.get("tags") or {}
    return all(have.get(k) == v for k, v in tags.items())

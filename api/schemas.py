"""Render domain objects as the contract's JSON shapes; parse request bodies.

Optional fields are omitted, never null (the SDKs' models read them so).
"""
from __future__ import annotations

import orjson
from sanic import HTTPResponse, Request

from session_supervisor.domain.model.network import effective_policy
from session_supervisor.domain.model.signals import signal_short_name
from session_supervisor.domain.model.timefmt import rfc3339
from session_supervisor.domain.ports import PublicJson

from .errors import ApiError


def parse_json(request: Request, allow_empty: bool = True):
    body = request.body
    if not body or not body.strip():
        if allow_empty:
            return None
        raise ApiError(400, "invalid_request", "request body is required")
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ApiError(400, "invalid_request", f"invalid JSON body: {exc}") from None


def ok(data, status: int = 200) -> HTTPResponse:
    return HTTPResponse(orjson.dumps({"success": True, "data": data}), status=status,
                        content_type="application/json")


def ok_events_page(events: list[PublicJson], earliest: int, latest: int) -> HTTPResponse:
    """``ok({"events": [...], "cursor": {...}})`` (the events page) for events the store rendered as JSON."""
    parts = [b'{"success":true,"data":{"events":[']
    for _seq, _kind, json in events:  # one copy of each event into the body, however large
        parts += (json, b",")
    if events:
        parts.pop()
    parts.append(b'],"cursor":{"earliest":%d,"latest":%d}}}' % (earliest, latest))
    return HTTPResponse(b"".join(parts), content_type="application/json")


_TIMES = (("started_ns", "started_at"), ("ready_ns", "ready_at"), ("finished_ns", "finished_at"))


def render_attempt(attempt: dict, *, audit: bool = False) -> dict:
    """The contract's attempt object; ``audit`` adds the start reason, ready_at and the pid after exit."""
    out = {"id": attempt["id"], "number": attempt["number"],
           "runtime_generation": attempt["runtime_generation"]}
    if audit and attempt.get("start_reason"):
        out["start_reason"] = attempt["start_reason"]
    if attempt.get("pid") and (audit or "finished_ns" not in attempt):
        out["pid"] = attempt["pid"]
    for key, name in _TIMES:
        if key in attempt and (audit or key != "ready_ns"):
            out[name] = rfc3339(attempt[key])
    if "exit_code" in attempt:
        out["exit_code"] = attempt["exit_code"]
    if "signal" in attempt:
        out["signal"] = signal_short_name(attempt["signal"])
    if attempt.get("reason"):
        out["reason"] = attempt["reason"]
    return out


def render_session(session, cursor: tuple[int, int]) -> dict:
    out = {"id": session.id, "spec": session.spec, "spec_version": session.spec_version,
           "phase": session.phase, "runtime_generation": session.generation}
    if session.attempts:
        out["attempt"] = render_attempt(session.attempts[-1])
    out["restart_count"] = session.restart_count
    out["cursor"] = {"earliest": cursor[0], "latest": cursor[1]}
    out["created_at"] = rfc3339(session.created_ns)
    out["updated_at"] = rfc3339(session.updated_ns)
    out["last_activity_at"] = rfc3339(session.last_activity_ns)
    return out


# A disabled deadline. The Go SDK refuses a Sandbox whose expires_at or hard_expires_at is
# null or absent; the zero time is the one value all three SDKs parse (Python shows year 1).
NO_DEADLINE = "0001-01-01T00:00:00Z"


def deadline(ns: int) -> str:
    return rfc3339(ns) if ns else NO_DEADLINE


def render_sandbox(sandbox) -> dict:
    paused = sandbox.status == "paused"
    runtime_id = "" if paused or sandbox.status == "failed" else f"{sandbox.id}-g{sandbox.runtime_generation}"
    out = {
        "id": sandbox.id, "template_id": sandbox.template, "team_id": sandbox.team_id or "local",
        "status": sandbox.status, "paused": paused, "auto_resume": sandbox.auto_resume,
        # Python requires runtime_id, Go pod_name (the reference's name for the same thing).
        "runtime_id": runtime_id, "pod_name": runtime_id,
        "runtime_generation": sandbox.runtime_generation,
        "claimed_at": rfc3339(sandbox.claimed_ns), "created_at": rfc3339(sandbox.created_ns),
        "updated_at": rfc3339(sandbox.updated_ns),
        "expires_at": deadline(sandbox.expires_ns), "hard_expires_at": deadline(sandbox.hard_expires_ns),
    }
    if sandbox.status == "failed":
        out["status_reason"] = sandbox.failure_reason
    if sandbox.config.get("resources"):
        out["resources"] = sandbox.config["resources"]
    if sandbox.config.get("services"):
        out["services"] = sandbox.config["services"]
    out["config"] = {"network": effective_policy(sandbox.config, sandbox.template)}
    if sandbox.config.get("mounts"):  # the volumes bound at claim (api/volume_wire.py)
        out["mounts"] = [{"sandboxvolume_id": m["sandboxvolume_id"], "mount_point": m["mount_point"]}
                         for m in sandbox.config["mounts"]]
    return out


def render_claim(sandbox) -> dict:
    runtime_id = f"{sandbox.id}-g{sandbox.runtime_generation}"
    out = {"sandbox_id": sandbox.id, "status": sandbox.status, "runtime_id": runtime_id,
           "pod_name": runtime_id, "template": sandbox.template}
    if sandbox.config.get("mounts"):  # bound synchronously: mounted once the claim answers
        out["bootstrap_mounts"] = [{"sandboxvolume_id": m["sandboxvolume_id"], "mount_point": m["mount_point"],
                                    "state": "mounted", "mounted_at": rfc3339(sandbox.claimed_ns)}
                                   for m in sandbox.config["mounts"]]
    return out

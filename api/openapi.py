"""The OpenAPI 3.1 document of both APIs, written from the contracts (served by routes/openapi.py).

Every route the app registers appears here (``tests/client/test_openapi.py``
compares the two, so a new route without a document entry fails a test).
Sandbox0 routes answer ``{"success","data"}`` / ``{"success":false,"error"}``
envelopes; the AeroLVM ``/v1`` facade answers bare objects and ``{"error"}``.
"""
from __future__ import annotations

from functools import lru_cache

from .openapi_access import SCHEMAS as ACCESS_SCHEMAS
from .openapi_access import access_paths
from .openapi_edges import SCHEMAS as EDGE_SCHEMAS
from .openapi_edges import edge_paths
from .openapi_links import add_links
from .openapi_schemas import ALL, INT64, ref
from .openapi_workspace import SCHEMAS as WORKSPACE_SCHEMAS
from .openapi_workspace import workspace_paths
from .openapi_templates import SCHEMAS as TEMPLATE_SCHEMAS
from .openapi_rootfs import SCHEMAS as ROOTFS_SCHEMAS
from .openapi_rootfs import rootfs_paths
from .openapi_templates import template_paths
from .openapi_volumes import SCHEMAS as VOLUME_SCHEMAS
from .openapi_volumes import volume_paths

SB = "/api/v1/sandboxes"
SS = SB + "/{sandbox_id}/sessions/{session_id}"
AERO = "/v1/sandboxes"
AS = AERO + "/{sandbox_id}/sessions/{session_id}"
ERRORS = {400: "invalid request", 401: "missing or wrong bearer token", 403: "forbidden",
          404: "unknown sandbox or session", 408: "exec_timeout", 409: "conflict",
          410: "cursor older than the retained journal (contexts: process_finished)",
          413: "too large (file_too_large; payload_too_large)",
          426: "a WebSocket route called without the upgrade", 429: "input buffer full",
          500: "<action>_failed", 503: "unavailable (lifecycle barrier, paused without auto_resume)",
          507: "insufficient storage (a full disk, the server's own reserve, the disk pool or a team's quota)"}
SESSION_ERRORS = (400, 401, 404, 503)


def _json(schema: dict) -> dict:
    return {"application/json": {"schema": schema}}


def ok_envelope(data: dict) -> dict:
    return {"type": "object", "required": ["success", "data"],
            "properties": {"success": {"const": True}, "data": data}}


def _path_params(path: str) -> list[dict]:
    names = [part[1:-1] for part in path.split("/") if part.startswith("{")]
    return [{"name": n, "in": "path", "required": True, "schema": {"type": "string"}} for n in names]


def operation(op_id: str, summary: str, ok: dict, errors=SESSION_ERRORS, body: str | None = None,
              body_required: bool = True, params: list | None = None, aero: bool = False, tag: str = "") -> dict:
    """``ok`` maps status -> data schema (enveloped for Sandbox0) or a ready response object."""
    responses = {}
    for status, schema in ok.items():
        if isinstance(schema, dict) and "description" in schema and "schema" not in schema:
            responses[str(status)] = schema
        else:
            responses[str(status)] = {"description": "success",
                                      "content": _json(schema if aero else ok_envelope(schema))}
    error_schema = ref("AeroError") if aero else ref("ErrorEnvelope")
    for status in errors:
        responses[str(status)] = {"description": ERRORS[status], "content": _json(error_schema)}
    op = {"operationId": op_id, "summary": summary, "tags": [tag or ("aerolvm" if aero else "sessions")],
          "responses": responses}
    if params:
        op["parameters"] = params
    if body:
        op["requestBody"] = {"required": body_required, "content": _json(ref(body))}
    return op


def _query(name: str, schema: dict, description: str = "") -> dict:
    return {"name": name, "in": "query", "required": False, "schema": schema, "description": description}


def _header(name: str, description: str) -> dict:
    return {"name": name, "in": "header", "required": False, "schema": {"type": "string"},
            "description": description}


AFTER = _query("after", INT64, "only events with seq > after (410 when older than the retained window)")
LIMIT = _query("limit", {"type": "integer", "minimum": 1, "maximum": 10000}, "page size (default 1000)")
SSE = {"description": "text/event-stream: `id: <seq>`, `event: <type>`, `data: <Event JSON>` blocks after the "
       "cursor, then live; `: heartbeat <latest>` comments every 15 s",
       "content": {"text/event-stream": {"schema": {"type": "string"}, "x-event-schema": ref("Event")}}}
UPGRADE = {"description": "WebSocket upgrade"}
NO_CONTENT = {"description": "done, no body"}
RAW = {"description": "raw bytes", "content": {"text/plain": {"schema": {"type": "string"}}}}


def sandbox0_paths() -> dict:
    tag = {"tag": "sandboxes"}
    status = _query("status", {"type": "string", "enum": ["starting", "running", "paused", "terminating",
                                                          "failed"]})
    paging = [status, _query("template_id", {"type": "string"}), _query("paused", {"type": "boolean"}),
              _query("limit", {"type": "integer", "minimum": 1, "maximum": 200}),
              _query("offset", {"type": "integer", "minimum": 0, "maximum": 2**31 - 1})]
    return {
        "/healthz": {"get": {**operation("healthz", "Liveness", {200: ref("Health")}, errors=(),
                                         tag="health"), "security": []}},
        "/health": {"get": {**operation("health", "Health in the AeroLVM SDK's shape (no envelope)", {200: {
            "description": "status, sandbox count, version", "content": _json({
                "type": "object", "required": ["status", "sandboxes", "version"],
                "properties": {"status": {"enum": ["ok", "starting"]}, "sandboxes": {"type": "integer"},
                               "version": {"type": "string"}}})}}, errors=(), tag="health"), "security": []}},
        "/metrics": {"get": operation("metrics", "Prometheus metrics (text exposition format)", {200: {
            "description": "text/plain; version=0.0.4", "content": {"text/plain": {"schema": {"type": "string"}}}}},
            errors=(401,), tag="meta")},
        "/api/v1/openapi.json": {"get": operation("openapi", "This document", {200: {
            "description": "the OpenAPI document", "content": _json({"type": "object"})}}, errors=(401,),
            tag="meta")},
        SB: {"post": operation("claim_sandbox", "Claim a sandbox from a template", {201: ref("ClaimResponse")},
                               (400, 401, 404, 409, 429, 503), "ClaimRequest", **tag),
             "get": operation("list_sandboxes", "List sandboxes, newest first", {200: ref("SandboxList")},
                              (400, 401), params=paging, **tag)},
        SB + "/{sandbox_id}": {
            "get": operation("get_sandbox", "Get a sandbox", {200: ref("Sandbox")}, (401, 404), **tag),
            "put": operation("update_sandbox", "Merge config (ttl, hard_ttl, auto_resume, …)",
                             {200: ref("Sandbox")}, (400, 401, 404, 409, 503), "UpdateSandboxRequest", **tag),
            "delete": operation("delete_sandbox", "Delete a sandbox and all its sessions",
                                {202: ref("DeleteSandboxResponse")}, (401, 404), **tag)},
        SB + "/{sandbox_id}/status": {"get": operation("sandbox_status", "Status view", {
            200: ref("SandboxStatus")}, (401, 404), **tag)},
        SB + "/{sandbox_id}/network": {
            "get": operation("get_sandbox_network", "The sandbox's network policy",
                             {200: ref("SandboxNetworkPolicy")}, (401, 404), **tag),
            "put": operation("update_sandbox_network", "Replace the network policy (applied to new connections)",
                             {200: ref("SandboxNetworkPolicy")}, (400, 401, 404, 503), "SandboxNetworkPolicy",
                             **tag)},
        SB + "/{sandbox_id}/pause": {"post": operation(
            "pause_sandbox", "Checkpoint and release the runtime", {200: ref("PauseResponse"),
                                                                    202: ref("PauseResponse")},
            (400, 401, 404, 409, 503), "PauseRequest", False, **tag)},
        SB + "/{sandbox_id}/resume": {"post": operation(
            "resume_sandbox", "New runtime generation; sessions follow runtime_recovery",
            {200: ref("ResumeResponse")}, (400, 401, 404, 409, 503), "MemoryRequest", False, **tag)},
        SB + "/{sandbox_id}/refresh": {"post": operation(
            "refresh_sandbox", "Re-arm the ttl deadlines", {200: ref("RefreshResponse")}, (400, 401, 404),
            "RefreshRequest", False, **tag)},
        **session_paths(),
        **workspace_paths(operation, _query, UPGRADE),
        **edge_paths(operation, _query),
    }


def session_paths() -> dict:
    key = _header("Idempotency-Key", "same key + same normalized spec = the same session (200)")
    return {
        SB + "/{sandbox_id}/sessions": {
            "get": operation("list_sessions", "List sessions (creation order)", {200: ref("SessionList")}),
            "post": operation("create_session", "Create a session", {201: ref("Session"), 200: ref("Session")},
                              (400, 401, 404, 409, 500, 503), "SessionSpec", params=[key])},
        SS: {"get": operation("get_session", "Get a session", {200: ref("Session")}),
             "put": operation("update_session", "Replace the spec", {200: ref("Session")},
                              (400, 401, 404, 500, 503), "SessionSpec"),
             "delete": operation("delete_session", "Stop and delete", {200: ref("DeleteSessionResponse")},
                                 (400, 401, 404, 500, 503))},
        SS + "/desired-state": {"put": operation("set_session_desired_state", "running or stopped",
                                                 {200: ref("Session")}, (400, 401, 404, 500, 503),
                                                 "DesiredStateRequest")},
        SS + "/attempts": {
            "post": operation("create_session_attempt", "Start (or replace) an attempt", {201: ref("Session")},
                              (400, 401, 404, 409, 500, 503), "AttemptRequest", False),
            "get": operation("list_session_attempts", "Every attempt ever (audit)", {200: ref("AttemptList")})},
        SS + "/inputs": {"post": operation("write_session_input", "Write stdin (deduplicated by input_id)",
                                           {202: ref("InputResponse")}, (400, 401, 404, 409, 429, 500, 503),
                                           "InputRequest")},
        SS + "/signals": {"post": operation("signal_session", "Signal the process group",
                                            {202: ref("SignalResponse")}, (400, 401, 404, 409, 500, 503),
                                            "SignalRequest")},
        SS + "/terminal": {"put": operation("resize_session_terminal", "Resize the PTY",
                                            {200: ref("ResizeResponse")}, (400, 401, 404, 409, 500, 503),
                                            "ResizeRequest")},
        SS + "/events": {"get": operation("list_session_events", "A page of the journal",
                                          {200: ref("EventPage")}, (400, 401, 404, 410), params=[AFTER, LIMIT])},
        SS + "/history": {"get": operation("list_session_history", "Lifecycle events only, never trimmed",
                                           {200: ref("EventPage")}, (400, 401, 404), params=[AFTER, LIMIT])},
        SS + "/events/stream": {"get": operation(
            "stream_session_events", "Server-sent events: replay after the cursor, then live", {200: SSE},
            (400, 401, 404, 410), params=[AFTER, LIMIT, _header("Last-Event-ID", "wins over ?after=")])},
        SS + "/ws": {"get": {**operation(
            "connect_session", "WebSocket duplex: events out; input/signal/resize requests in, each acked",
            {101: UPGRADE}, (400, 401, 404, 410, 503), params=[AFTER, LIMIT]),
            "x-websocket": {"client": ref("WsClientMessage"), "server": ref("WsServerMessage"),
                            "close_codes": {"1000": "session deleted", "1001": "server shutdown",
                                            "1013": "slow subscriber detached; reconnect with after"}}}},
    }


def aerolvm_paths() -> dict:
    aero = {"aero": True}
    return {
        AERO: {"get": operation("aero_list_sandboxes", "List sandboxes", {200: ref("AeroSandboxList")},
                                (401,), params=[_query("name", {"type": "string"})], **aero),
               "post": operation("aero_create_sandbox", "Create a sandbox", {201: ref("AeroSandbox")},
                                 (400, 401, 409), "AeroSandboxCreate", **aero)},
        AERO + "/{sandbox_id}": {
            "get": operation("aero_get_sandbox", "Get a sandbox", {200: ref("AeroSandbox")}, (401, 404), **aero),
            "delete": operation("aero_delete_sandbox", "Delete a sandbox", {204: NO_CONTENT}, (401, 404), **aero)},
        AERO + "/{sandbox_id}/sessions": {
            "get": operation("aero_list_sessions", "List sessions", {200: ref("AeroSessionList")}, (401, 404),
                             **aero),
            "post": operation("aero_create_session", "Start a session", {201: ref("AeroSession")},
                              (400, 401, 404), "AeroSessionCreate", False, **aero)},
        AS: {"get": operation("aero_get_session", "Get a session", {200: ref("AeroSession")}, (401, 404), **aero),
             "delete": operation("aero_delete_session", "Kill and delete", {204: NO_CONTENT}, (401, 404),
                                 **aero)},
        AS + "/signal": {"post": operation("aero_signal_session", "Signal the process group",
                                           {200: ref("AeroStatus")}, (400, 401, 404, 409), "AeroSignalRequest",
                                           **aero)},
        AS + "/resize": {"post": operation("aero_resize_session", "Resize the PTY (no-op for pipes)",
                                           {200: ref("AeroStatus")}, (400, 401, 404, 409), "AeroResizeRequest",
                                           **aero)},
        AS + "/log": {"get": operation("aero_session_log", "Retained output, raw", {200: RAW}, (401, 404), **aero)},
        AS + "/recording": {"get": operation("aero_session_recording", "Always 404 (no asciicast recording)",
                                             {200: RAW}, (401, 404), **aero)},
        AS + "/attach": {"get": {**operation("aero_attach_session", "WebSocket attach: replay then live output",
                                             {101: UPGRADE}, (401, 404), **aero),
                                 "x-websocket": {"frames": ref("AeroAttachFrames")}}},
    }


@lru_cache(maxsize=1)
def document() -> dict:
    paths = {**sandbox0_paths(), **template_paths(operation), **rootfs_paths(operation), **aerolvm_paths(),
             **access_paths(operation, _header), **volume_paths(operation, _query, UPGRADE)}
    add_links(paths)
    for path, item in paths.items():
        if "{" in path:
            item["parameters"] = _path_params(path)
    return {
        "openapi": "3.1.0",
        "info": {"title": "Session supervisor", "version": "0.1.0",
                 "description": "Sandbox0-compatible sandbox and session API under /api/v1, and the "
                                "AeroLVM-compatible facade under /v1 (the official sandbox0 and "
                                "aerolvm-sdk clients work unmodified)."},
        "servers": [{"url": "/"}],
        "security": [{"bearer": []}],
        "tags": [{"name": n} for n in ("sandboxes", "sessions", "contexts", "files", "services", "observability",
                                            "templates", "rootfs", "volumes", "aerolvm", "access", "health",
                                            "meta")],
        "paths": paths,
        "components": {"schemas": {**ALL, **WORKSPACE_SCHEMAS, **TEMPLATE_SCHEMAS, **ACCESS_SCHEMAS, **EDGE_SCHEMAS,
                                   **ROOTFS_SCHEMAS, **VOLUME_SCHEMAS},
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
    }

"""The AeroLVM-compatible facade under ``/v1``.

Served at the root of the host because the SDK drops any base path for WebSockets.
Sandboxes map onto ours; sessions are ordinary supervised sessions, visible in both
APIs. Errors are ``{"error": "..."}`` objects (api/errors.py picks that shape for
``/v1/``); nothing here answers 421/429/502-504, which the SDK would retry.
"""
from __future__ import annotations

import asyncio
import signal

import orjson
from sanic import Blueprint, HTTPResponse, Request

from session_supervisor.domain.model.commands import DeleteSession, SendSignal, SignalRequest
from session_supervisor.domain.model.errors import DomainError, PtyUnavailableError

from .. import aerolvm_schema as shapes
from .. import commands
from ..aerolvm_attach import REPLAY_BYTES, Attach
from ..auth import principal_of
from ..errors import ApiError
from ..schemas import parse_json
from .ws import GONE, attachments
from ..proxy import bridged, owned_here

http_bp = Blueprint("aerolvm", url_prefix="/v1/sandboxes")
attach_bp = Blueprint("aerolvm_attach", url_prefix="/v1/sandboxes")
bp = Blueprint.group(http_bp, attach_bp)


def manager(request: Request):
    return request.app.ctx.container.manager


def runtime_of(request: Request, sandbox_id: str):
    return manager(request).registry.runtime_for(sandbox_id)


def reply(data, status: int = 200) -> HTTPResponse:
    return HTTPResponse(orjson.dumps(data), status=status, content_type="application/json")


def rendered(request: Request, runtime, session) -> dict:
    """As committed (``store.view``): never a state whose events the writer has not committed."""
    return shapes.render_session(runtime.shown(session), attachments(request.app).count(session.id))


def _flag(request: Request, name: str) -> bool:
    return request.args.get(name, "").lower() in ("1", "true", "yes")


# ---- sandboxes ----------------------------------------------------------------------------
@http_bp.get("", strict_slashes=False)
async def list_sandboxes(request: Request):
    """200 [Sandbox...]; ``?name=`` and ``?tag.k=v`` filter; one page (no next-page token)."""
    name = request.args.get("name", "").strip()
    tags = {key[4:]: values[0] for key, values in request.args.items() if key.startswith("tag.")}
    include_env = _flag(request, "include_env")
    visible = await manager(request).list_all(visible_to=principal_of(request))
    return reply([shapes.render_sandbox(sb, include_env) for sb in visible
                  if shapes.sandbox_matches(sb, name, tags)])


@http_bp.post("", strict_slashes=False)
async def create_sandbox(request: Request):
    """201 Sandbox; 400 image required; 409 name taken. Unknown keys (mounts, ...) are ignored."""
    name, config = shapes.create_sandbox_config(parse_json(request))
    owner = principal_of(request)  # names are unique within a team: another team's are not seen
    taken = await manager(request).list_all(visible_to=owner) if name else []
    if any(shapes.sandbox_facts(sb).get("name") == name for sb in taken):
        raise ApiError(409, "conflict", f"sandbox name {name!r} already exists")
    # An image the store holds (pinned, or a name imported here) is the sandbox's root filesystem;
    # any other is recorded and shown back, and the sandbox runs on the host's system as before.
    sandbox = await manager(request).claim("default", config, owner=owner, image=config["aerolvm"]["image"])
    return reply(shapes.render_sandbox(sandbox), 201)


@http_bp.get("/<sandbox_id>")
async def get_sandbox(request: Request, sandbox_id: str):
    """200 Sandbox; 404 sandbox not found."""
    return reply(shapes.render_sandbox(manager(request).registry.sandbox(sandbox_id), _flag(request, "include_env")))


@http_bp.delete("/<sandbox_id>")
async def delete_sandbox(request: Request, sandbox_id: str):
    """204; 404 sandbox not found."""
    await manager(request).transitions.delete(sandbox_id)
    return HTTPResponse(status=204)


# ---- sessions -----------------------------------------------------------------------------
@http_bp.post("/<sandbox_id>/sessions")
async def create_session(request: Request, sandbox_id: str):
    """201 Session (a new one every time, as upstream); 400 bad options; 404 sandbox."""
    spec = shapes.create_session_spec(parse_json(request))
    runtime = runtime_of(request, sandbox_id)
    session, _created = await commands.create_session(runtime, spec, "")
    return reply(rendered(request, runtime, session), 201)


@http_bp.get("/<sandbox_id>/sessions")
async def list_sessions(request: Request, sandbox_id: str):
    """200 {"sessions": [...]} ordered by creation."""
    runtime = runtime_of(request, sandbox_id)
    count = attachments(request.app).count
    return reply({"sessions": [shapes.render_session(view, count(view.id)) for _, view in runtime.shown_sessions()]})


@http_bp.get("/<sandbox_id>/sessions/<session_id>")
async def get_session(request: Request, sandbox_id: str, session_id: str):
    """200 Session; 404 session not found."""
    runtime = runtime_of(request, sandbox_id)
    return reply(rendered(request, runtime, runtime.session(session_id)))


@http_bp.delete("/<sandbox_id>/sessions/<session_id>")
async def delete_session(request: Request, sandbox_id: str, session_id: str):
    """204 after SIGKILL to the group (as upstream) and the ordinary delete; attachers get exit."""
    runtime = runtime_of(request, sandbox_id)
    runtime.session(session_id)
    try:
        await runtime.handle(SendSignal(session_id, SignalRequest(signal.SIGKILL)))
    except DomainError:
        pass  # not running: there is nothing to kill
    await runtime.handle(DeleteSession(session_id))
    return HTTPResponse(status=204)


@http_bp.post("/<sandbox_id>/sessions/<session_id>/signal")
async def signal_session(request: Request, sandbox_id: str, session_id: str):
    """200 {"status":"ok"}; 400 unsupported signal; 404; 409 not running."""
    body = shapes.body_object(parse_json(request))
    await commands.send_signal(runtime_of(request, sandbox_id), session_id, {"signal": body.get("signal")})
    return reply({"status": "ok"})


@http_bp.post("/<sandbox_id>/sessions/<session_id>/resize")
async def resize_session(request: Request, sandbox_id: str, session_id: str):
    """200 {"status":"ok"} (a no-op for pipes); 400 sizes <= 0; 404; 409 not running."""
    body = shapes.body_object(parse_json(request))
    try:
        await commands.resize(runtime_of(request, sandbox_id), session_id,
                              {"rows": body.get("rows"), "cols": body.get("cols")})
    except PtyUnavailableError:
        pass
    return reply({"status": "ok"})


@http_bp.get("/<sandbox_id>/sessions/<session_id>/log")
async def session_log(request: Request, sandbox_id: str, session_id: str):
    """200 raw bytes: the retained output window the attach replay sends, stdout and stderr interleaved."""
    runtime = runtime_of(request, sandbox_id)
    upto = runtime.journal.cursor(runtime.session(session_id))[1]
    chunks = await runtime.journal.output_tail(session_id, upto, REPLAY_BYTES)
    return HTTPResponse(b"".join(data for _stream, data in chunks), content_type="text/plain; charset=utf-8")


@http_bp.get("/<sandbox_id>/sessions/<session_id>/recording")
async def session_recording(request: Request, sandbox_id: str, session_id: str):
    """404 {"error": "no recording"}: sessions are journaled, not recorded as asciicast."""
    runtime_of(request, sandbox_id).session(session_id)
    raise ApiError(404, "not_found", "no recording")


# ---- attach -------------------------------------------------------------------------------
@attach_bp.on_request(priority=-1)  # after the app-wide bearer auth (priority 0)
async def check_before_upgrade(request: Request):
    """404 for an unknown sandbox or session, as JSON, before the 101."""
    if bridged(request):
        return None
    runtime_of(request, request.match_info["sandbox_id"]).session(request.match_info["session_id"])


@attach_bp.websocket("/<sandbox_id>/sessions/<session_id>/attach")
@owned_here
async def attach(request: Request, ws, sandbox_id: str, session_id: str):
    attach_ = Attach(ws, runtime_of(request, sandbox_id), session_id)
    try:
        subscriber = attach_.subscribe()
    except DomainError as exc:  # deleted between the check and the upgrade
        await ws.send(orjson.dumps({"type": "error", "message": exc.message}).decode())
        await ws.close(1000, exc.message)
        return
    try:
        with attachments(request.app).track(session_id, subscriber):
            await attach_.run()
    except asyncio.CancelledError:
        ws.end_connection(1001, "server shutdown")  # shutdown; a no-op once the peer is gone
        raise
    except GONE:
        pass
    finally:
        attach_.runtime.hub.unsubscribe(subscriber)

"""Session routes of the Sandbox0 API. Three lines of intent each."""
from __future__ import annotations

from sanic import Blueprint, Request

from session_supervisor.domain.model.json_fields import body_object

from .. import commands
from ..schemas import ok, parse_json, render_session
from ..session_list import session_list_response

bp = Blueprint("sessions", url_prefix="/api/v1/sandboxes/<sandbox_id>/sessions")


def runtime_of(request: Request, sandbox_id: str):
    return request.app.ctx.container.manager.registry.runtime_for(sandbox_id)


def rendered(runtime, session) -> dict:
    """As committed (``store.view``): never a state whose events the writer has not committed."""
    return render_session(runtime.shown(session), runtime.journal.cursor(session))


@bp.get("", ctx_action="list_sessions", strict_slashes=False)
async def list_sessions(request: Request, sandbox_id: str):
    """200 {"sessions": [...]}; 404 not_found."""
    return session_list_response(runtime_of(request, sandbox_id))


@bp.post("", ctx_action="create_session", strict_slashes=False)
async def create_session(request: Request, sandbox_id: str):
    """201 new, 200 idempotent replay; 400 invalid_request; 409 session_conflict."""
    raw = parse_json(request)
    runtime = runtime_of(request, sandbox_id)
    session, created = await commands.create_session(runtime, raw, request.headers.get("idempotency-key", ""))
    return ok(rendered(runtime, session), 201 if created else 200)


@bp.get("/<session_id>", ctx_action="get_session")
async def get_session(request: Request, sandbox_id: str, session_id: str):
    """200 Session; 404 session_not_found."""
    runtime = runtime_of(request, sandbox_id)
    return ok(rendered(runtime, runtime.session(session_id)))


@bp.put("/<session_id>", ctx_action="update_session")
async def update_session(request: Request, sandbox_id: str, session_id: str):
    """200 Session; 400 invalid_request; 404 session_not_found."""
    raw = parse_json(request)
    runtime = runtime_of(request, sandbox_id)
    return ok(rendered(runtime, await commands.update_session(runtime, session_id, raw)))


@bp.delete("/<session_id>", ctx_action="delete_session")
async def delete_session(request: Request, sandbox_id: str, session_id: str):
    """200 {"deleted": true}; 404 session_not_found."""
    await commands.delete_session(runtime_of(request, sandbox_id), session_id)
    return ok({"deleted": True})


@bp.put("/<session_id>/desired-state", ctx_action="set_session_desired_state")
async def set_desired_state(request: Request, sandbox_id: str, session_id: str):
    """200 Session; 400 invalid desired state; 404."""
    body = parse_json(request)
    runtime = runtime_of(request, sandbox_id)
    return ok(rendered(runtime, await commands.set_desired_state(runtime, session_id, body)))


@bp.post("/<session_id>/attempts", ctx_action="create_session_attempt")
async def create_attempt(request: Request, sandbox_id: str, session_id: str):
    """201 Session with the new attempt; 409 when one runs and replace_current is false; 404."""
    body = parse_json(request)
    runtime = runtime_of(request, sandbox_id)
    return ok(rendered(runtime, await commands.create_attempt(runtime, session_id, body)), 201)


@bp.post("/<session_id>/inputs", ctx_action="write_session_input")
async def write_input(request: Request, sandbox_id: str, session_id: str):
    """202 {input_id, attempt_id, accepted, duplicate}; 400; 404; 409; 429 input_buffer_full."""
    body = body_object(parse_json(request))
    return ok(await commands.write_input(runtime_of(request, sandbox_id), session_id, body), 202)


@bp.post("/<session_id>/signals", ctx_action="signal_session")
async def send_signal(request: Request, sandbox_id: str, session_id: str):
    """202 {"accepted": true}; 400 unsupported signal; 404; 409."""
    await commands.send_signal(runtime_of(request, sandbox_id), session_id, parse_json(request))
    return ok({"accepted": True}, 202)


@bp.put("/<session_id>/terminal", ctx_action="resize_session_terminal")
async def resize_terminal(request: Request, sandbox_id: str, session_id: str):
    """200 {"resized": true}; 400; 404; 409 not running, mismatch, or pty not available."""
    await commands.resize(runtime_of(request, sandbox_id), session_id, parse_json(request))
    return ok({"resized": True})

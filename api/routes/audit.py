"""Audit views (the journal keeps every lifecycle event): every attempt ever, and the lifecycle history from seq 1.

Neither is trimmed while the session exists: retention deletes only ``output`` and
control events, and these views read nothing else.
"""
from __future__ import annotations

from sanic import Blueprint, Request

from ..journal_wire import json_rows
from ..wire import parse_cursor, parse_limit

from ..schemas import ok, ok_events_page, render_attempt
from .sessions import runtime_of

bp = Blueprint("audit", url_prefix="/api/v1/sandboxes/<sandbox_id>/sessions/<session_id>")

@bp.get("/attempts", ctx_action="list_session_attempts")
async def list_attempts(request: Request, sandbox_id: str, session_id: str):
    """200 {"attempts": [...]} oldest first; 404 session_not_found."""
    attempts = runtime_of(request, sandbox_id).journal.attempts(session_id)
    return ok({"attempts": [render_attempt(a, audit=True) for a in attempts]})


@bp.get("/history", ctx_action="list_session_history")
async def list_history(request: Request, sandbox_id: str, session_id: str):
    """200 {"events", "cursor"}: session.* and attempt.* events after ``after``; 400; 404.

    Page with ``after = events[-1].seq`` until a page holds fewer than ``limit`` events.
    """
    after = parse_cursor(request.args.get("after"))
    limit = parse_limit(request.args.get("limit"))
    (events, _last), (earliest, latest) = await runtime_of(request, sandbox_id).journal.history_page(
        session_id, after, limit, json_rows)
    return ok_events_page(events, earliest, latest)

"""The runtime gate in front of every session route: auto-resume and the pause barrier.

Before a session call runs, the sandbox must have a runtime: a paused one is resumed when
it has ``auto_resume`` (else 503 ``unavailable``), and while a pause hook runs, new mutating
calls and WebSocket upgrades get 503 while reads and SSE keep working. Admitted calls are
counted until their response, so the pause barrier can wait for those in flight.
It is one app-wide middleware, so every session route (HTTP, SSE, WebSocket, AeroLVM)
passes it without each handler having to remember.
"""
from __future__ import annotations

from sanic import Request

from .errors import AEROLVM_PREFIX, aerolvm_error, envelope

READ_METHODS = frozenset(("GET", "HEAD", "OPTIONS"))


RUNTIME_PATHS = ("/sessions", "/contexts", "/files")  # calls that need the sandbox's runtime


def runtime_call(request: Request) -> str | None:
    """The sandbox id when this request is a session, context or file call, else None."""
    if request.route is None or not any(part in request.path for part in RUNTIME_PATHS):
        return None
    return request.match_info.get("sandbox_id")


def undecodable_header(request: Request) -> str | None:
    """The name of a header whose value is not UTF-8 (Sanic keeps such bytes as surrogates,
    which no store or JSON encoder accepts), else None."""
    for name, value in request.headers.items():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return name.encode("ascii", "replace").decode()
    return None


def install_runtime_gate(app) -> None:
    """Install after auth: an unauthenticated request must never wake a sandbox."""

    @app.on_request
    async def refuse_undecodable_headers(request: Request):
        name = undecodable_header(request)
        if name is None:
            return None
        message = f"header {name} is not valid UTF-8"
        if request.path.startswith(AEROLVM_PREFIX):
            return aerolvm_error(400, message)
        return envelope(400, "invalid_request", message)

    @app.on_request
    async def admit_session_call(request: Request):
        sandbox_id = runtime_call(request)
        if sandbox_id is None or getattr(request.ctx, "forward_to", None) is not None:
            return None  # another node runs it: its own gate admits the call
        upgrade = request.headers.get("upgrade", "").lower() == "websocket"
        streaming = upgrade or request.path.endswith("/events/stream")
        mutating = upgrade or request.method not in READ_METHODS
        manager = request.app.ctx.container.manager
        ticket = await manager.transitions.admit(sandbox_id, mutating=mutating, streaming=streaming)
        if ticket is not None:
            ticket.bind(request)
            request.ctx.runtime_ticket = ticket
        return None

    @app.on_response
    async def release_session_call(request: Request, response):
        ticket = getattr(request.ctx, "runtime_ticket", None)
        if ticket is not None:
            ticket.release()

"""What the caller of a route may do: the permission each route needs, and only its team's sandboxes.

One app-wide middleware, after auth and the routing to another node and before the runtime
gate, so that no route (HTTP, SSE, WebSocket, the AeroLVM facade, the audit views, contexts,
files) can forget it and a refused call never wakes a paused sandbox:

1. the route's permission, as the reference gateway assigns them: reads (GET, SSE, the files
   watch) need ``sandbox:read``; writes, signals, inputs, execs, pauses and the session and
   context WebSockets (they carry input) need ``sandbox:write``; claiming needs
   ``sandbox:create`` and deleting a sandbox ``sandbox:delete``; volumes the same way with their
   ``sandboxvolume:*`` permissions (a claim that mounts volumes also needs ``sandboxvolume:write``,
   checked by the claim route). Missing: 403 ``forbidden``
   ``insufficient permissions``, whatever the sandbox (so a 403 says nothing about it).
2. a route that names a sandbox of another team answers 404 ``not_found``, exactly as an id
   that does not exist (the reference answers 403; here another team's ids do not exist).

Lists and claims take the principal themselves (``manager.list_all(visible_to=…)``,
``manager.claim(…, owner=…)``); ``/api-keys`` and ``/teams`` are decided by ``domain.api_keys``.
An HTTP call forwarded to the node that runs the sandbox is checked there, with the same key; a
WebSocket is accepted here and bridged, so its team is checked here, from the journal's record.
"""
from __future__ import annotations

import asyncio

from sanic import Request

from session_supervisor.domain.model import access as a
from session_supervisor.domain.model.errors import ForbiddenError, SandboxNotFoundError

from .errors import handle_error
from .proxy import bridged

READ_METHODS = frozenset(("GET", "HEAD", "OPTIONS"))
COLLECTIONS = ("/api/v1/sandboxes", "/v1/sandboxes")
TEMPLATES = "/api/v1/templates"
VOLUMES = "/api/v1/sandboxvolumes"
SELF_DECIDED = ("/api-keys", "/teams", "/api/v1/openapi.json")  # anyone with a key, or domain.api_keys


def required_permission(request: Request) -> str | None:
    path, method = request.path.rstrip("/") or "/", request.method
    if path.startswith(SELF_DECIDED):
        return None
    reading = method in READ_METHODS
    if path.startswith(TEMPLATES):
        return {"POST": a.TEMPLATE_CREATE, "PUT": a.TEMPLATE_WRITE, "DELETE": a.TEMPLATE_DELETE}.get(
            method, a.TEMPLATE_READ)
    if path.startswith(VOLUMES):
        return volume_permission(request, path, reading)
    if path in COLLECTIONS:
        return a.SANDBOX_READ if reading else a.SANDBOX_CREATE
    sandbox_id = request.match_info.get("sandbox_id") if request.route is not None else None
    if sandbox_id is not None:
        if request.headers.get("upgrade", "").lower() == "websocket":
            return a.SANDBOX_READ if path.endswith("/files/watch") else a.SANDBOX_WRITE
        if reading:
            return a.SANDBOX_READ
        if method == "DELETE" and path in (f"{prefix}/{sandbox_id}" for prefix in COLLECTIONS):
            return a.SANDBOX_DELETE
        return a.SANDBOX_WRITE
    return a.SANDBOX_READ if reading else a.SANDBOX_WRITE  # /metrics and routes not named above


def volume_permission(request: Request, path: str, reading: bool) -> str:
    """As the reference gateway: create the collection, read (the files watch too), delete a
    volume, and write for everything else (files, fork, snapshots, restore)."""
    if request.headers.get("upgrade", "").lower() == "websocket" or reading:
        return a.VOLUME_READ
    if path == VOLUMES:
        return a.VOLUME_CREATE
    volume_id = request.match_info.get("volume_id") if request.route is not None else None
    if request.method == "DELETE" and path == f"{VOLUMES}/{volume_id}":
        return a.VOLUME_DELETE
    return a.VOLUME_WRITE


def install_access_policy(app) -> None:
    """Install after auth and the forwarding middleware, before the runtime gate."""

    @app.on_request
    async def authorize(request: Request):
        principal = getattr(request.ctx, "principal", None)
        if principal is None or request.route is None:
            return None  # unprotected (health, console pages) or no such route
        permission = required_permission(request)
        if permission is not None and not principal.can(permission):
            return handle_error(request, ForbiddenError())
        sandbox_id = request.match_info.get("sandbox_id")
        if sandbox_id is None or principal.all_teams:
            return None
        manager = request.app.ctx.container.manager
        if bridged(request):  # the owner would refuse only after our 101: decide before it
            record = await asyncio.to_thread(manager.factory.journals.record, sandbox_id)
            team = record.team_id if record is not None else None
        else:
            try:
                team = manager.registry.sandbox(sandbox_id).team_id
            except SandboxNotFoundError:
                return None  # the route answers its own 404
        if team is None or not principal.sees(team):
            return handle_error(request, SandboxNotFoundError())
        return None

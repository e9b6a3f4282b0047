"""Sandbox services: ``GET`` and ``PUT /api/v1/sandboxes/{id}/services``.

The list lives in the sandbox's ``config.services`` (also set by claim and update), so it is kept
with the sandbox across pause, resume and restarts; PUT replaces it, ``[]`` clears it, and works
on a paused sandbox (only the stored record changes).
"""
from __future__ import annotations

from sanic import Blueprint, Request

from session_supervisor.domain.model.service_session import check_runnable
from session_supervisor.domain.service_sessions import retire_removed
from session_supervisor.domain.model.services import (
    ServicesError,
    check_resume_allowed,
    normalize_services,
    service_view,
)

from ..errors import ApiError
from ..exposure import public_url
from ..schemas import ok, parse_json

bp = Blueprint("services", url_prefix="/api/v1/sandboxes/<sandbox_id>/services")


def parse_services(raw, auto_resume: bool) -> list[dict]:
    """The normalized list, or 400 bad_request naming the field (claim, update and PUT)."""
    try:
        services = normalize_services(raw)
        check_runnable(services)
        check_resume_allowed(services, auto_resume)
    except ServicesError as exc:
        raise ApiError(400, "bad_request", str(exc)) from None
    return services


def services_response(request: Request, sandbox) -> dict:
    settings = request.app.ctx.container.settings
    views = [service_view(service, public_url(settings, sandbox.id, service["port"]))
             for service in sandbox.config.get("services") or []]
    return {"sandbox_id": sandbox.id, "services": views, "exposure_domain": settings.exposure_domain}


@bp.get("", ctx_action="get_sandbox_services", strict_slashes=False)
async def get_services(request: Request, sandbox_id: str):
    """200 {sandbox_id, services, exposure_domain}; 404 not_found."""
    return ok(services_response(request, request.app.ctx.container.manager.registry.sandbox(sandbox_id)))


@bp.put("", ctx_action="update_sandbox_services", strict_slashes=False)
async def put_services(request: Request, sandbox_id: str):
    """200 as GET; 400 bad_request (missing or invalid services); 404 not_found; 503 unavailable."""
    manager = request.app.ctx.container.manager
    sandbox = manager.registry.sandbox(sandbox_id)
    try:
        body = parse_json(request)
    except ApiError as exc:
        raise ApiError(400, "bad_request", exc.message) from None
    if not isinstance(body, dict) or body.get("services") is None:
        raise ApiError(400, "bad_request", "services is required")
    services = parse_services(body["services"], sandbox.auto_resume)
    updated = await manager.transitions.update(sandbox_id, {"services": services})
    runtime = manager.registry.running.get(sandbox_id)
    if runtime is not None:  # paused: a removed service's session is retired by a PUT once running
        await retire_removed(runtime, services)
    return ok(services_response(request, updated))

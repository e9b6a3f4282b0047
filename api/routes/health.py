"""Liveness: 200 without auth once the server has started its sandboxes."""
from __future__ import annotations

from sanic import Blueprint, Request

from ..schemas import ok

bp = Blueprint("health")


@bp.get("/healthz")
async def healthz(request: Request):
    ready = request.app.ctx.container.manager is not None
    return ok({"status": "ok" if ready else "starting"}, 200 if ready else 503)

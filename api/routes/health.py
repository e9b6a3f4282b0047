"""Liveness: 200 without auth once the server has started its sandboxes, 503 with the
reason while a sandbox's store refuses writes (disk full, read-only)."""
from __future__ import annotations

from sanic import Blueprint, Request

from ..schemas import ok

bp = Blueprint("health")


@bp.get("/healthz")
async def healthz(request: Request):
    container = request.app.ctx.container
    if container.manager is None:
        return ok({"status": "starting"}, 503)
    faults = container.pipeline.faults.reasons()
    if faults:
        return ok({"status": "store_unwritable", "stores": faults}, 503)
    return ok({"status": "ok"}, 200)

"""Liveness: 200 without auth once the server has started its sandboxes, 503 with the
reason while a sandbox's store refuses writes (disk full, read-only) or, with more than one
node, while this node cannot renew its leases (the database is out of reach)."""
from __future__ import annotations

from importlib import metadata

from sanic import Blueprint, Request
from sanic.response import json

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
    placement = container.manager.placement
    if not placement.clustered:
        return ok({"status": "ok"}, 200)
    if placement.lease_error:  # its sandboxes will move to other nodes: take it out of rotation
        return ok({"status": "database_unreachable", "node": container.node_id,
                   "reason": placement.lease_error}, 503)
    return ok({"status": "ok", "node": container.node_id}, 200)


@bp.get("/health")
async def health(request: Request):
    """The AeroLVM SDK's ``health()`` (``GET /health``, no /v1): the facade's bare JSON, no envelope."""
    manager = request.app.ctx.container.manager
    ready = manager is not None
    body = {"status": "ok" if ready else "starting", "sandboxes": len(manager.registry.list()) if ready else 0,
            "version": server_version()}
    return json(body, 200 if ready else 503)


def server_version() -> str:
    try:
        return metadata.version("session-supervisor")
    except metadata.PackageNotFoundError:  # run from a checkout without pip install
        return "unknown"

"""Sandbox volumes (``/api/v1/sandboxvolumes``), as the TypeScript SDK (0.9.5) and the Go SDK call
them; the Python SDK has no volumes. Shapes and codes are the reference storage proxy's: lists put an
**array** in ``data``, deletes of an unknown id answer 200 ``{"deleted": true}`` (another team's is
404), creates and forks answer 201, a restore ``{"status": "restored"}``. Errors: 400 bad_request, 404
not_found, 409 conflict (with the reference's ``details`` for a volume still mounted), 429
quota_exceeded, 507 insufficient_storage. The rules are ``domain.volumes``'."""
from __future__ import annotations

import asyncio

from sanic import Blueprint, Request

from session_supervisor.domain.model.errors import UnavailableError

from ..auth import principal_of
from ..schemas import ok, parse_json
from ..volume_wire import parse_create, parse_fork, parse_snapshot, render_snapshot, render_volume

bp = Blueprint("volumes", url_prefix="/api/v1/sandboxvolumes")
TRUE = ("true", "1", "yes")


def volumes(request: Request):
    service = request.app.ctx.container.volumes
    if service is None:
        raise UnavailableError("sandbox volumes are not available on this server: they are disks of their "
                               "own, which need root and loop devices (see the server's start-up warning)")
    return service


async def rendered(request: Request, volume) -> dict:
    service = volumes(request)
    return render_volume(volume, await service.allocated(volume), service.clock_ns())


@bp.post("", ctx_action="create_volume", strict_slashes=False)
async def create_volume(request: Request):
    """201 SandboxVolume; 400 (access_mode, a blank snapshot_id, size); 404 snapshot; 429; 507."""
    wanted = parse_create(parse_json(request))
    volume = await volumes(request).create(principal_of(request), **wanted)
    return ok(await rendered(request, volume), 201)


@bp.get("", ctx_action="list_volumes", strict_slashes=False)
async def list_volumes(request: Request):
    """200 [SandboxVolume]: the caller's team's."""
    found = await volumes(request).list(principal_of(request))
    return ok(list(await asyncio.gather(*(rendered(request, v) for v in found))))


@bp.get("/<volume_id>", ctx_action="get_volume")
async def get_volume(request: Request, volume_id: str):
    """200 SandboxVolume; 404."""
    return ok(await rendered(request, await volumes(request).get(principal_of(request), volume_id)))


@bp.delete("/<volume_id>", ctx_action="delete_volume")
async def delete_volume(request: Request, volume_id: str):
    """200 {"deleted": true} (also for an unknown id); 404 another team's; 409 while mounted (force=true)."""
    force = request.args.get("force", "").lower() in TRUE
    await volumes(request).delete(principal_of(request), volume_id, force)
    return ok({"deleted": True})


@bp.post("/<volume_id>/fork", ctx_action="fork_volume")
async def fork_volume(request: Request, volume_id: str):
    """201 SandboxVolume with source_volume_id: a copy of its files now; 400; 404; 429; 507."""
    wanted = parse_fork(parse_json(request))
    volume = await volumes(request).fork(principal_of(request), volume_id, **wanted)
    return ok(await rendered(request, volume), 201)


@bp.post("/<volume_id>/snapshots", ctx_action="create_volume_snapshot")
async def create_snapshot(request: Request, volume_id: str):
    """201 Snapshot; 400 name is required; 404; 429; 507."""
    name, description = parse_snapshot(parse_json(request))
    snapshot = await volumes(request).create_snapshot(principal_of(request), volume_id, name, description)
    return ok(render_snapshot(snapshot), 201)


@bp.get("/<volume_id>/snapshots", ctx_action="list_volume_snapshots")
async def list_snapshots(request: Request, volume_id: str):
    """200 [Snapshot]; 404."""
    found = await volumes(request).snapshots(principal_of(request), volume_id)
    return ok([render_snapshot(s) for s in found])


@bp.get("/<volume_id>/snapshots/<snapshot_id>", ctx_action="get_volume_snapshot")
async def get_snapshot(request: Request, volume_id: str, snapshot_id: str):
    """200 Snapshot; 404 (also another volume's)."""
    return ok(render_snapshot(await volumes(request).snapshot(principal_of(request), volume_id, snapshot_id)))


@bp.delete("/<volume_id>/snapshots/<snapshot_id>", ctx_action="delete_volume_snapshot")
async def delete_snapshot(request: Request, volume_id: str, snapshot_id: str):
    """200 {"deleted": true} (also for an unknown snapshot); 404 for the volume."""
    await volumes(request).delete_snapshot(principal_of(request), volume_id, snapshot_id)
    return ok({"deleted": True})


@bp.post("/<volume_id>/snapshots/<snapshot_id>/restore", ctx_action="restore_volume_snapshot")
async def restore_snapshot(request: Request, volume_id: str, snapshot_id: str):
    """200 {"status": "restored"}; 404; 409 while a running sandbox mounts the volume."""
    await volumes(request).restore(principal_of(request), volume_id, snapshot_id)
    return ok({"status": "restored"})

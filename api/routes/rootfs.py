"""Rootfs snapshot, restore and fork routes (environments contract: rootfs snapshots).

Team scope: routes under ``/api/v1/sandboxes/{id}`` are checked by ``api/access.py`` (another
team's sandbox is 404); a snapshot's own routes check the snapshot's team here, with the same
answer (404) for another team's snapshot as for one that does not exist. How snapshots are taken
and what they cost: docs/snapshots-and-forks.md.
"""
from __future__ import annotations

import re
from datetime import datetime, timezone

from sanic import Blueprint, Request

from session_supervisor.domain.forks import fork
from session_supervisor.domain.model.spec import MAX_SECONDS
from session_supervisor.domain.model.timefmt import rfc3339

from ..auth import principal_of
from ..errors import ApiError
from ..schemas import ok, render_sandbox
from .sandboxes import _bad, _memory_flag, _object, manager

bp = Blueprint("rootfs", url_prefix="/api/v1")
NAME_MAX, DESCRIPTION_MAX = 255, 8192


def render_snapshot(snapshot) -> dict:
    """``SandboxRootFSSnapshot``: ``expires_at`` omitted when unset (Python raises on null)."""
    out = {"id": snapshot.id, "sandbox_id": snapshot.sandbox_id, "created_at": rfc3339(snapshot.created_ns),
           "size_bytes": snapshot.size_bytes}
    if snapshot.name:
        out["name"] = snapshot.name
    if snapshot.description:
        out["description"] = snapshot.description
    if snapshot.expires_ns:
        out["expires_at"] = rfc3339(snapshot.expires_ns)
    return out


def _text(body: dict, key: str, limit: int) -> str:
    value = body.get(key)
    if value is None:
        return ""
    if not isinstance(value, str) or len(value.encode()) > limit:
        raise _bad(f"{key} must be a string of at most {limit} bytes")
    return value


def _expires_ns(value, now_ns: int) -> int:
    if value in (None, ""):
        return 0
    try:
        when = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        when = None
    if when is None:
        raise _bad("expires_at must be an RFC 3339 time")
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    if when.year <= 1:  # the reference's zero time: not set
        return 0
    ns = int(when.timestamp() * 1_000_000_000)
    if ns <= now_ns:
        raise _bad("expires_at must be in the future")
    return ns


@bp.post("/sandboxes/<sandbox_id>/snapshots", ctx_action="create_sandbox_rootfs_snapshot")
async def create_snapshot(request: Request, sandbox_id: str):
    """201 SandboxRootFSSnapshot; 400 bad_request; 404; 409 conflict (failed sandbox); 503 unavailable;
    507 insufficient_storage (the team's snapshot quota, or no room in the disk pool)."""
    body = _object(request)
    snapshots = manager(request).snapshots
    name, description = _text(body, "name", NAME_MAX), _text(body, "description", DESCRIPTION_MAX)
    expires = _expires_ns(body.get("expires_at"), manager(request).clock.now_ns())
    snapshot = await snapshots.create(sandbox_id, name, description, expires)
    return ok(render_snapshot(snapshot), 201)


@bp.get("/sandboxes/<sandbox_id>/snapshots", ctx_action="list_sandbox_rootfs_snapshots")
async def list_snapshots(request: Request, sandbox_id: str):
    """200 {snapshots, count}; 404."""
    items = [render_snapshot(s) for s in manager(request).snapshots.list(sandbox_id)]
    return ok({"snapshots": items, "count": len(items)})


@bp.get("/sandbox-rootfs-snapshots/<snapshot_id>", ctx_action="get_sandbox_rootfs_snapshot")
async def get_snapshot(request: Request, snapshot_id: str):
    """200 SandboxRootFSSnapshot; 404 (also another team's)."""
    return ok(render_snapshot(manager(request).snapshots.get(snapshot_id, principal_of(request))))


@bp.delete("/sandbox-rootfs-snapshots/<snapshot_id>", ctx_action="delete_sandbox_rootfs_snapshot")
async def delete_snapshot(request: Request, snapshot_id: str):
    """200 {deleted: true}; 404. Sandboxes claimed, restored or forked from it keep their disks."""
    await manager(request).snapshots.delete(snapshot_id, principal_of(request))
    return ok({"deleted": True})


@bp.post("/sandboxes/<sandbox_id>/rootfs/restore", ctx_action="restore_sandbox_rootfs")
async def restore(request: Request, sandbox_id: str):
    """200 {sandbox_id, snapshot_id, status: paused}; 400; 404 (sandbox or snapshot); 409 not paused."""
    body = _object(request)
    snapshot_id = body.get("snapshot_id")
    if not isinstance(snapshot_id, str) or not snapshot_id.strip():
        raise _bad("snapshot_id is required")
    await manager(request).snapshots.restore(sandbox_id, snapshot_id.strip(), principal_of(request))
    return ok({"sandbox_id": sandbox_id, "snapshot_id": snapshot_id.strip(), "status": "paused"})


DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
ROLLBACK_MAX = 7 * 86400


@bp.put("/sandboxes/<sandbox_id>/rootfs/rebase", ctx_action="rebase_sandbox_rootfs")
async def rebase(request: Request, sandbox_id: str):
    """400 (the body checked as the Python SDK documents it); 404; then 503: a rootfs here is its
    disk, not file-level changes over a base that could be swapped."""
    body = _object(request)
    digest = body.get("target_base_artifact_digest")
    if not isinstance(digest, str) or not DIGEST.match(digest):
        raise _bad("target_base_artifact_digest must be sha256:<64 lowercase hex digits>")
    ttl = body.get("rollback_ttl", 86400)
    if isinstance(ttl, bool) or not isinstance(ttl, int) or not 0 <= ttl <= ROLLBACK_MAX:
        raise _bad(f"rollback_ttl must be an integer from 0 to {ROLLBACK_MAX}")
    manager(request).registry.sandbox(sandbox_id)
    raise ApiError(503, "unavailable", "rootfs rebase is not supported by this server")


def _fork_deadline(config: dict, key: str) -> int | None:
    value = config.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SECONDS:
        raise _bad(f"config.{key} must be an integer from 0 to {MAX_SECONDS}")
    return value


@bp.post("/sandboxes/<sandbox_id>/fork", ctx_action="fork_sandbox")
async def fork_sandbox(request: Request, sandbox_id: str):
    """201 {source_sandbox_id, sandbox} (the child, paused, generation 0); 400 (memory: true, bad
    ttl); 404; 409 conflict (failed source); 503 unavailable; 507 insufficient_storage."""
    body = _object(request)
    if _memory_flag(body):  # a filesystem copy must never pass for a memory fork
        raise _bad("memory fork is not supported: only the filesystem is copied")
    config = body.get("config") or {}
    if not isinstance(config, dict):
        raise _bad("config must be an object")
    ttl, hard_ttl = _fork_deadline(config, "ttl"), _fork_deadline(config, "hard_ttl")
    if ttl and hard_ttl and ttl > hard_ttl:
        raise _bad("ttl must be less than or equal to hard_ttl")
    child = await fork(manager(request).snapshots, sandbox_id, ttl, hard_ttl)
    return ok({"source_sandbox_id": sandbox_id, "sandbox": render_sandbox(child)}, 201)

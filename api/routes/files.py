"""Workspace file routes of the Sandbox0 API (``read_file``, ``write_file``, ``list_files``, …).

Paths and bodies are the SDKs' (``apispec/api/files``); every path is a sandbox path, confined to
its /workspace (and /tmp when on disk) by ``infra.confined_fs`` through the container. What each
call does and answers is ``file_serving``'s, shared with the volumes' file routes.
"""
from __future__ import annotations

from sanic import Blueprint, Request

from session_supervisor.domain.model.errors import DomainError

from . import file_serving as serve
from .sessions import runtime_of
from ..proxy import owned_here

bp = Blueprint("files", url_prefix="/api/v1/sandboxes/<sandbox_id>/files")


def sandbox_fs(request: Request, sandbox_id: str):
    runtime_of(request, sandbox_id)  # 404 for an unknown sandbox; the gate resumed a paused one
    return request.app.ctx.container.sandbox_fs(sandbox_id)


@bp.get("", ctx_action="read_file", strict_slashes=False)
async def read_file(request: Request, sandbox_id: str):
    """200 the bytes (application/octet-stream), or {content, encoding: base64} for Accept: JSON
    (413 file_too_large past 64 MiB); 400; 403; 404; 409. Both are streamed."""
    return await serve.read_file(request, sandbox_id, sandbox_fs(request, sandbox_id))


@bp.post("", ctx_action="write_file", strict_slashes=False, stream=True)
async def write_file(request: Request, sandbox_id: str):
    """200 {"written": true}; with mkdir=true 201 {"created": true}; 400; 403; 404 (parent); 409."""
    return await serve.write_file(request, sandbox_id, sandbox_fs(request, sandbox_id))


@bp.get("/stat", ctx_action="stat_file")
async def stat_file(request: Request, sandbox_id: str):
    """200 FileInfo {name, path, type, size, mode, mod_time, is_link, link_target?}; 400; 403; 404."""
    return await serve.stat_file(request, sandbox_id, sandbox_fs(request, sandbox_id))


@bp.get("/list", ctx_action="list_files")
async def list_files(request: Request, sandbox_id: str):
    """200 {"entries": [FileInfo], "has_more"?: true, "next_after"?}: entries in name order, at most
    ``limit`` (default and most 100,000) after the name ``after``, streamed; 400; 403; 404; 409."""
    return await serve.list_files(request, sandbox_id, sandbox_fs(request, sandbox_id))


@bp.delete("", ctx_action="delete_file", strict_slashes=False)
async def delete_file(request: Request, sandbox_id: str):
    """200 {"deleted": true} (a directory with everything in it; a link, not its target); 400; 403; 404."""
    return await serve.delete_file(request, sandbox_id, sandbox_fs(request, sandbox_id))


@bp.post("/move", ctx_action="move_file")
async def move_file(request: Request, sandbox_id: str):
    """200 {"moved": true}; 400 source and destination are required; 403; 404; 409."""
    return await serve.move_file(request, sandbox_id, sandbox_fs(request, sandbox_id))


@bp.websocket("/watch", ctx_action="watch_files")
@owned_here
async def watch_files(request: Request, ws, sandbox_id: str):
    """{"action": "subscribe", path, recursive} -> {"type": "subscribed", watch_id, path} or
    {"type": "error", error}; then {"type": "event", watch_id, event, path} (create, write, remove,
    rename, chmod); {"action": "unsubscribe", watch_id} -> {"type": "unsubscribed", watch_id}."""
    try:
        fs = sandbox_fs(request, sandbox_id)
    except DomainError as exc:
        await ws.close(1000, exc.message)
        return
    await serve.watch_files(request, ws, sandbox_id, fs)

"""A volume's file API (``/api/v1/sandboxvolumes/{volume_id}/files``), as the TypeScript and Go
SDKs call it: the sandbox file API's own code (``file_serving``) over a view rooted at the volume
(paths are relative to its root; an absolute link inside it starts again there). The volume's disk
is mounted on this node for the length of each call (``domain.volumes.Volumes.files``); while a
sandbox binds it, that is the same mount the sandbox writes through. Unknown or another team's
volume: 404 ``not_found``. Files the API makes belong to the volume's root (uid 0 on its disk),
which every sandbox that binds it sees as its own uid.
"""
from __future__ import annotations

from contextlib import asynccontextmanager

from sanic import Blueprint, Request

from session_supervisor.domain.model.errors import DomainError

from ..auth import principal_of
from . import file_serving as serve
from .volume_archive import import_archive
from .volumes import volumes

bp = Blueprint("volume_files", url_prefix="/api/v1/sandboxvolumes/<volume_id>/files")


def key(volume_id: str) -> str:
    """Its share of the file threads and watches: a volume's own, apart from any sandbox's."""
    return f"volume:{volume_id}"


@asynccontextmanager
async def volume_fs(request: Request, volume_id: str):
    container = request.app.ctx.container
    async with volumes(request).files(principal_of(request), volume_id) as root:
        yield container.volume_fs(root)


@bp.get("", ctx_action="read_volume_file", strict_slashes=False)
async def read_file(request: Request, volume_id: str):
    """200 the bytes, or {content, encoding: base64} for Accept: JSON; 400; 403; 404; 409; 413."""
    async with volume_fs(request, volume_id) as fs:
        return await serve.read_file(request, key(volume_id), fs)


@bp.post("", ctx_action="write_volume_file", strict_slashes=False, stream=True)
async def write_file(request: Request, volume_id: str):
    """200 {"written": true}; with mkdir=true 201 {"created": true}; 400; 404; 409; 507."""
    async with volume_fs(request, volume_id) as fs:
        return await serve.write_file(request, key(volume_id), fs)


@bp.get("/stat", ctx_action="stat_volume_file")
async def stat_file(request: Request, volume_id: str):
    """200 FileInfo; 400; 404."""
    async with volume_fs(request, volume_id) as fs:
        return await serve.stat_file(request, key(volume_id), fs)


@bp.get("/list", ctx_action="list_volume_files")
async def list_files(request: Request, volume_id: str):
    """200 {"entries": [FileInfo], "has_more"?, "next_after"?}; 400; 404; 409."""
    async with volume_fs(request, volume_id) as fs:
        return await serve.list_files(request, key(volume_id), fs)


@bp.delete("", ctx_action="delete_volume_file", strict_slashes=False)
async def delete_file(request: Request, volume_id: str):
    """200 {"deleted": true}; 400; 403 (the volume's root itself); 404."""
    async with volume_fs(request, volume_id) as fs:
        return await serve.delete_file(request, key(volume_id), fs)


@bp.post("/move", ctx_action="move_volume_file")
async def move_file(request: Request, volume_id: str):
    """200 {"moved": true}; 400; 404; 409."""
    async with volume_fs(request, volume_id) as fs:
        return await serve.move_file(request, key(volume_id), fs)


@bp.put("/archive", ctx_action="import_volume_archive", stream=True)
async def archive(request: Request, volume_id: str):
    """200 {files, directories, symlinks, bytes}: a tar body unpacked under ``path`` (default /)."""
    async with volume_fs(request, volume_id) as fs:
        return await import_archive(request, key(volume_id), fs)


@bp.websocket("/watch", ctx_action="watch_volume_files")
async def watch_files(request: Request, ws, volume_id: str):
    """The sandbox files watch, on the volume's files (paths relative to its root)."""
    try:
        async with volume_fs(request, volume_id) as fs:
            await serve.watch_files(request, ws, key(volume_id), fs)
    except DomainError as exc:
        await ws.close(1000, exc.message)

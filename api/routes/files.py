"""Workspace file routes of the Sandbox0 API (``read_file``, ``write_file``, ``list_files``, …).

Paths and bodies are the SDKs' (``apispec/api/files``); every path is a sandbox path,
confined to its /workspace (and /tmp when on disk) by ``infra.confined_fs`` through the
container. Codes: 400 invalid_request (no path), 403 permission_denied (outside the sandbox's
file areas, also through a symlink), 404 file_not_found, 409 path_exists / path_not_directory /
path_not_file. Bodies stream in both directions: an upload goes to a temporary file in the
target's directory and is renamed over the target once complete.
"""
from __future__ import annotations

import asyncio
import base64
import itertools
import logging
import os

import orjson

from sanic import Blueprint, Request

from session_supervisor.domain.model.errors import DomainError, FileTooLargeError, InvalidRequestError
from session_supervisor.domain.model.json_fields import body_object

from ..schemas import ok, parse_json
from .sessions import service
from .ws import GONE
from ..proxy import owned_here

log = logging.getLogger(__name__)

bp = Blueprint("files", url_prefix="/api/v1/sandboxes/<sandbox_id>/files")

READ_CHUNK = 1 << 20
JSON_READ_LIMIT = 64 << 20  # base64 in JSON is built in memory; larger files are read as bytes
TRUE = ("true", "1", "yes")


def sandbox_fs(request: Request, sandbox_id: str):
    service(request, sandbox_id)  # 404 for an unknown sandbox; the gate resumed a paused one
    return request.app.ctx.container.sandbox_fs(sandbox_id)


def _path(request: Request, name: str = "path") -> str:
    path = request.args.get(name)
    if not path:
        raise InvalidRequestError(f"{name} is required")
    return path


async def _run(fn, *args, **kwargs):
    return await asyncio.to_thread(fn, *args, **kwargs)


@bp.get("", ctx_action="read_file", strict_slashes=False)
async def read_file(request: Request, sandbox_id: str):
    """200 the bytes (application/octet-stream), or {content, encoding: base64} for Accept: JSON
    (413 file_too_large past 64 MiB); 400; 403; 404; 409."""
    fs = sandbox_fs(request, sandbox_id)
    fd, size = await _run(fs.open_read, _path(request))
    try:
        if _wants_json(request):
            if size > JSON_READ_LIMIT:
                raise FileTooLargeError(f"file too large for a JSON read ({size} bytes); read it as bytes")
            data = await _run(_read_all, fd)
            return ok({"content": base64.b64encode(data).decode(), "encoding": "base64"})
        response = await request.respond(content_type="application/octet-stream",
                                         headers={"content-length": str(size)})
        sent = 0
        while sent < size:
            chunk = await _run(os.read, fd, min(READ_CHUNK, size - sent))
            if not chunk:  # the file shrank while it was sent: the length cannot be honoured
                break
            await response.send(chunk)
            sent += len(chunk)
        await response.eof()
        return None
    finally:
        os.close(fd)


def _wants_json(request: Request) -> bool:
    accept = request.headers.get("accept", "")
    return "application/json" in accept and "octet-stream" not in accept


def _read_all(fd: int) -> bytes:
    parts = []
    while chunk := os.read(fd, READ_CHUNK):
        parts.append(chunk)
    return b"".join(parts)


@bp.post("", ctx_action="write_file", strict_slashes=False, stream=True)
async def write_file(request: Request, sandbox_id: str):
    """200 {"written": true}; with mkdir=true 201 {"created": true}; 400; 403; 404 (parent); 409."""
    fs = sandbox_fs(request, sandbox_id)
    path = _path(request)
    if request.args.get("mkdir", "").lower() in TRUE:
        await _drain(request)
        await _run(fs.mkdir, path, request.args.get("recursive", "").lower() in TRUE)
        return ok({"created": True}, 201)
    stream = request.stream
    if stream is not None:  # Sanic lifts the size limit for streamed bodies; an upload keeps the API's
        stream.request_max_size = request.app.config.REQUEST_MAX_SIZE
    upload = await _run(fs.begin_write, path)
    try:
        while stream is not None and (chunk := await stream.read()) is not None:
            if chunk:
                await _run(upload.write, chunk)
        await _run(upload.commit)
    finally:
        await _run(upload.abort)
    return ok({"written": True})


async def _drain(request: Request) -> None:
    while request.stream is not None and await request.stream.read() is not None:
        pass


@bp.get("/stat", ctx_action="stat_file")
async def stat_file(request: Request, sandbox_id: str):
    """200 FileInfo {name, path, type, size, mode, mod_time, is_link, link_target?}; 400; 403; 404."""
    fs = sandbox_fs(request, sandbox_id)
    return ok(await _run(fs.stat, _path(request)))


@bp.get("/list", ctx_action="list_files")
async def list_files(request: Request, sandbox_id: str):
    """200 {"entries": [FileInfo]}; 400; 403; 404; 409 path_not_directory."""
    fs = sandbox_fs(request, sandbox_id)
    return ok({"entries": await _run(fs.list, _path(request))})


@bp.delete("", ctx_action="delete_file", strict_slashes=False)
async def delete_file(request: Request, sandbox_id: str):
    """200 {"deleted": true} (a directory with everything in it; a link, not its target); 400; 403; 404."""
    fs = sandbox_fs(request, sandbox_id)
    await _run(fs.remove, _path(request))
    return ok({"deleted": True})


@bp.post("/move", ctx_action="move_file")
async def move_file(request: Request, sandbox_id: str):
    """200 {"moved": true}; 400 source and destination are required; 403; 404; 409."""
    body = body_object(parse_json(request))
    source, destination = body.get("source"), body.get("destination")
    if not isinstance(source, str) or not isinstance(destination, str) or not source or not destination:
        raise InvalidRequestError("source and destination are required")
    fs = sandbox_fs(request, sandbox_id)
    await _run(fs.move, source, destination)
    return ok({"moved": True})


# ---- the watch WebSocket ---------------------------------------------------------------------
_watch_ids = itertools.count(1)


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
    watches: dict[str, tuple[object, asyncio.Task]] = {}
    try:
        while (raw := await ws.recv()) is not None:
            reply = await _watch_request(ws, fs, watches, raw)
            if reply is not None:
                await ws.send(orjson.dumps(reply).decode())
    except (*GONE, asyncio.CancelledError):
        pass
    finally:
        for watch, task in watches.values():
            await _stop(watch, task)


async def _watch_request(ws, fs, watches: dict, raw) -> dict | None:
    try:
        message = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None  # the reference ignores what it cannot parse
    if not isinstance(message, dict):
        return None
    if message.get("action") == "subscribe":
        path = message.get("path")
        try:
            if not isinstance(path, str) or not path:
                raise InvalidRequestError("path is required")
            watch = await asyncio.to_thread(fs.watch, path, bool(message.get("recursive")))
        except (DomainError, OSError) as exc:
            return {"type": "error", "error": getattr(exc, "message", None) or str(exc)}
        watch_id = f"watch-{next(_watch_ids)}"
        watches[watch_id] = (watch, asyncio.ensure_future(_forward(ws, watch_id, watch)))
        return {"type": "subscribed", "watch_id": watch_id, "path": path}
    if message.get("action") == "unsubscribe" and message.get("watch_id") in watches:
        await _stop(*watches.pop(message["watch_id"]))
        return {"type": "unsubscribed", "watch_id": message["watch_id"]}
    return None


async def _stop(watch, task: asyncio.Task) -> None:
    # The reader must be off the loop (the task's own cleanup) before the inotify fd is closed,
    # or the loop would keep polling a closed descriptor.
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    watch.close()


async def _forward(ws, watch_id: str, watch) -> None:
    try:
        async for event, path in watch.events():
            await ws.send(orjson.dumps({"type": "event", "watch_id": watch_id, "event": event,
                                        "path": path}).decode())
    except GONE:
        pass

"""The file API over HTTP for any confined view: a sandbox's files (``files.py``) and a volume's
(``volume_files.py``) are served by the same code, on the same file threads and the same watches.

Each call takes ``key`` (whose share of the file threads and of the watches it uses: a sandbox id,
or ``volume:<id>``) and ``fs`` (an ``infra.confined_fs.ConfinedFS``, reached through the
container). Codes: 400 invalid_request (no path), 403 permission_denied (outside the view's file
areas, also through a symlink), 404 file_not_found, 409 path_exists / path_not_directory /
path_not_file. Bodies stream in both directions: an upload goes to a temporary file in the target's
directory and is renamed over the target once complete.
"""
from __future__ import annotations

import asyncio
import binascii
import itertools
import logging
import os

import orjson

from sanic import Request

from session_supervisor.domain.model.errors import DomainError, FileTooLargeError, InvalidRequestError
from session_supervisor.domain.model.json_fields import body_object

from ..schemas import ok, parse_json
from .ws import GONE

log = logging.getLogger(__name__)

READ_CHUNK = 1 << 20
JSON_READ_LIMIT = 64 << 20  # base64 in JSON is streamed too, but a client builds it in memory
JSON_CHUNK = 3 << 20        # a multiple of 3: the base64 of each chunk continues the previous one
LIST_PAGE = 100_000         # entries one listing answers at most: ``after`` pages on (infra.confined_fs)
LIST_BATCH = 1000           # entries rendered (stat, JSON) per call on the file threads
MAX_SUBSCRIPTIONS = 256     # watch subscriptions of one WebSocket
TRUE = ("true", "1", "yes")


def path_arg(request: Request, name: str = "path") -> str:
    path = request.args.get(name)
    if not path:
        raise InvalidRequestError(f"{name} is required")
    return path


def _calls(request: Request):
    return request.app.ctx.container.file_calls


async def _run(request: Request, key: str, fn, *args, **kwargs):
    """A blocking file call, on the file API's threads within ``key``'s share of them."""
    return await _calls(request).run(key, fn, *args, **kwargs)

async def read_file(request: Request, key: str, fs):
    """200 the bytes (application/octet-stream), or {content, encoding: base64} for Accept: JSON
    (413 file_too_large past 64 MiB); 400; 403; 404; 409. Both are streamed."""
    fd, size = await _run(request, key, fs.open_read, path_arg(request))
    try:
        if _wants_json(request):
            if size > JSON_READ_LIMIT:
                raise FileTooLargeError(f"file too large for a JSON read ({size} bytes); read it as bytes")
            response = await request.respond(content_type="application/json")
            await response.send(b'{"success":true,"data":{"content":"')
            sent = 0
            while sent < size:
                chunk = await _run(request, key, _read_full, fd, min(JSON_CHUNK, size - sent))
                if not chunk:
                    break
                await response.send(binascii.b2a_base64(chunk, newline=False))
                sent += len(chunk)
            await response.send(b'","encoding":"base64"}}')
            await response.eof()
            return None
        response = await request.respond(content_type="application/octet-stream",
                                         headers={"content-length": str(size)})
        sent = 0
        while sent < size:
            chunk = await _run(request, key, os.read, fd, min(READ_CHUNK, size - sent))
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


def _read_full(fd: int, size: int) -> bytes:
    """``size`` bytes, or fewer only at the end of the file (base64 chunks must stay whole)."""
    parts, have = [], 0
    while have < size and (chunk := os.read(fd, size - have)):
        parts.append(chunk)
        have += len(chunk)
    return b"".join(parts)


async def write_file(request: Request, key: str, fs):
    """200 {"written": true}; with mkdir=true 201 {"created": true}; 400; 403; 404 (parent); 409."""
    path = path_arg(request)
    if request.args.get("mkdir", "").lower() in TRUE:
        await _drain(request)
        await _run(request, key, fs.mkdir, path, request.args.get("recursive", "").lower() in TRUE)
        return ok({"created": True}, 201)
    stream = request.stream
    if stream is not None:  # Sanic lifts the size limit for streamed bodies; an upload keeps the API's
        stream.request_max_size = request.app.config.REQUEST_MAX_SIZE
    length = request.headers.get("content-length", "")
    if length.isdigit():  # 507 before a byte is read when it cannot fit above the server's reserve
        await _run(request, key, fs.admit, int(length))
    upload = await _run(request, key, fs.begin_write, path)
    try:
        while stream is not None and (chunk := await stream.read()) is not None:
            if chunk:
                await _run(request, key, upload.write, chunk)
        await _run(request, key, upload.commit)
    finally:
        await _run(request, key, upload.abort)
    return ok({"written": True})


async def _drain(request: Request) -> None:
    while request.stream is not None and await request.stream.read() is not None:
        pass


async def stat_file(request: Request, key: str, fs):
    """200 FileInfo {name, path, type, size, mode, mod_time, is_link, link_target?}; 400; 403; 404."""
    return ok(await _run(request, key, fs.stat, path_arg(request)))


async def list_files(request: Request, key: str, fs):
    """200 {"entries": [FileInfo], "has_more"?: true, "next_after"?}: entries in name order, at most
    ``limit`` (default and most 100,000) after the name ``after``, streamed; 400; 403; 404; 409."""
    path, after, limit = path_arg(request), request.args.get("after", ""), _limit(request)
    async with _calls(request).listing(key):
        listing = await _run(request, key, fs.open_listing, path, after, limit)
        try:
            response = await request.respond(content_type="application/json")
            await response.send(b'{"success":true,"data":{"entries":[')
            for start in range(0, len(listing.names), LIST_BATCH):
                batch = await _run(request, key, _render, listing, start, start + LIST_BATCH)
                if batch:
                    await response.send((b"," if start else b"") + batch)
            tail = b"]"
            if listing.more:
                tail += b',"has_more":true,"next_after":' + orjson.dumps(listing.names[-1])
            await response.send(tail + b"}}")
            await response.eof()
        finally:
            listing.close()  # one close(2): here, so that a client gone away cannot leave the fd open
    return None


def _limit(request: Request) -> int:
    raw = request.args.get("limit")
    if raw is None:
        return LIST_PAGE
    if not raw.isdigit() or not 1 <= int(raw) <= LIST_PAGE:
        raise InvalidRequestError(f"limit must be between 1 and {LIST_PAGE}")
    return int(raw)


def _render(listing, start: int, stop: int) -> bytes:
    """A batch of entries as JSON without its brackets (joined into one array by the caller)."""
    return orjson.dumps(listing.render(start, stop))[1:-1]


async def delete_file(request: Request, key: str, fs):
    """200 {"deleted": true} (a directory with everything in it; a link, not its target); 400; 403; 404."""
    await _run(request, key, fs.remove, path_arg(request))
    return ok({"deleted": True})


async def move_file(request: Request, key: str, fs):
    """200 {"moved": true}; 400 source and destination are required; 403; 404; 409."""
    body = body_object(parse_json(request))
    source, destination = body.get("source"), body.get("destination")
    if not isinstance(source, str) or not isinstance(destination, str) or not source or not destination:
        raise InvalidRequestError("source and destination are required")
    await _run(request, key, fs.move, source, destination)
    return ok({"moved": True})


# ---- the watch WebSocket ---------------------------------------------------------------------
_watch_ids = itertools.count(1)


async def watch_files(request: Request, ws, key: str, fs):
    """{"action": "subscribe", path, recursive} -> {"type": "subscribed", watch_id, path} or
    {"type": "error", error}; then {"type": "event", watch_id, event, path} (create, write, remove,
    rename, chmod); {"action": "unsubscribe", watch_id} -> {"type": "unsubscribed", watch_id}."""
    watches: dict[str, tuple[object, asyncio.Task]] = {}
    hub, calls = request.app.ctx.container.watches, _calls(request)

    async def subscribe(path: str, recursive: bool):
        return await hub.subscribe(calls, fs, key, path, recursive)

    try:
        while (raw := await ws.recv()) is not None:
            reply = await _watch_request(ws, subscribe, watches, raw)
            if reply is not None:
                await ws.send(orjson.dumps(reply).decode())
    except (*GONE, asyncio.CancelledError):
        pass
    finally:
        for watch, task in watches.values():
            await _stop(watch, task)


async def _watch_request(ws, subscribe, watches: dict, raw) -> dict | None:
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
            if len(watches) >= MAX_SUBSCRIPTIONS:
                raise InvalidRequestError(f"at most {MAX_SUBSCRIPTIONS} subscriptions per connection")
            watch = await subscribe(path, bool(message.get("recursive")))
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
            if event == "dropped":
                await ws.send(orjson.dumps({"type": "error", "watch_id": watch_id,
                                            "error": "events dropped: the client reads too slowly"}).decode())
                return
            await ws.send(orjson.dumps({"type": "event", "watch_id": watch_id, "event": event,
                                        "path": path}).decode())
    except GONE:
        pass

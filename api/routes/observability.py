"""Observability routes: a sandbox's logs and events, paged with a
cursor and time filters, and their ``watch=true`` NDJSON streams. Both are read from the sandbox's
journal (``domain/observability_reader.py``); nothing is stored for them.

A watch sends ``{"type": "log"|"event", "data"}`` lines as the journal commits them (checked every
quarter second, reading only when something was committed), a ``watermark`` line with the resume
cursor after each batch, and a ``heartbeat`` every 15 s when idle; it ends when the client goes,
the sandbox is deleted (an ``error`` line) or the server stops.
"""
from __future__ import annotations

import asyncio
import time

import orjson
from sanic import Blueprint, Request

from session_supervisor.domain.model import observability as obs
from session_supervisor.domain.model.errors import DomainError
from session_supervisor.domain.model.timefmt import rfc3339
from session_supervisor.domain.observability_reader import ObservabilityReader

from ..observability_query import event_query, log_query, watching
from ..schemas import ok

bp = Blueprint("observability", url_prefix="/api/v1/sandboxes/<sandbox_id>/observability")
POLL_S = 0.25
HEARTBEAT_S = 15.0


def reader(request: Request) -> ObservabilityReader:
    app = request.app
    if getattr(app.ctx, "observability", None) is None:
        app.ctx.observability = ObservabilityReader(app.ctx.container.manager)
    return app.ctx.observability


def _team(request: Request, sandbox_id: str) -> str:
    return request.app.ctx.container.manager.registry.sandbox(sandbox_id).team_id  # 404 for an unknown sandbox


def _instance(request: Request) -> str:
    return request.app.ctx.container.node_id


def _page(key: str, rendered: list[dict], positions: obs.Positions, more: bool) -> dict:
    cursor = obs.encode_cursor(positions)
    data = {key: rendered, "watermark": cursor}
    if more:
        data["next_cursor"] = cursor
    return data


@bp.get("/logs", ctx_action="list_sandbox_logs")
async def list_logs(request: Request, sandbox_id: str):
    """200 {logs, next_cursor?, watermark}; watch=true: NDJSON; 400 bad_request; 404 not_found."""
    watch = watching(request.args)
    query, context_id = log_query(request.args, watch)
    read = reader(request)
    team = _team(request, sandbox_id)
    render = lambda item: obs.render_log(item, sandbox_id, rfc3339(item.occurred_ns), team)  # noqa: E731
    fetch = lambda q: read.logs(sandbox_id, q, context_id)  # noqa: E731
    if watch:
        return await _watch(request, sandbox_id, query, fetch, render, "log")
    items, positions, more = await fetch(query)
    return ok(_page("logs", [render(i) for i in items], positions, more))


@bp.get("/events", ctx_action="list_sandbox_observability_events")
async def list_events(request: Request, sandbox_id: str):
    """200 {events, next_cursor?, watermark}; watch=true: NDJSON; 400 bad_request; 404 not_found."""
    watch = watching(request.args)
    query = event_query(request.args, watch)
    read, instance, team = reader(request), _instance(request), _team(request, sandbox_id)
    render = lambda item: obs.render_event(item, sandbox_id, rfc3339(item.occurred_ns), instance, team)  # noqa: E731
    fetch = lambda q: read.events(sandbox_id, q)  # noqa: E731
    if watch:
        return await _watch(request, sandbox_id, query, fetch, render, "event")
    items, positions, more = await fetch(query)
    return ok(_page("events", [render(i) for i in items], positions, more))


async def _watch(request: Request, sandbox_id: str, query, fetch, render, kind: str):
    read = reader(request)
    read.manager.registry.sandbox(sandbox_id)  # 404 before the stream starts
    if not query.positions and not query.start_ns:  # from now on
        query.positions = read.latest_positions(sandbox_id)
    ending = _ending(request.app)
    response = await request.respond(content_type="application/x-ndjson",
                                     headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    seen: dict = {}
    idle_since = time.monotonic()
    await response.send(_line({"type": "heartbeat", "time": rfc3339(time.time_ns())}))  # headers out now
    try:
        while not ending.is_set():
            if read.changed_since(sandbox_id, query.positions, seen):
                while True:
                    items, query.positions, more = await fetch(query)
                    if items:
                        await response.send(b"".join(_line({"type": kind, "data": render(i)}) for i in items))
                    if items or more:
                        await response.send(_line({"type": "watermark", "cursor": obs.encode_cursor(query.positions),
                                                   "watermark": rfc3339(time.time_ns())}))
                        idle_since = time.monotonic()
                    if not more:
                        break
            elif time.monotonic() - idle_since >= HEARTBEAT_S:
                await response.send(_line({"type": "heartbeat", "time": rfc3339(time.time_ns())}))
                idle_since = time.monotonic()
            try:
                await asyncio.wait_for(ending.wait(), POLL_S)
            except asyncio.TimeoutError:
                pass
    except DomainError as exc:  # the sandbox went away under the stream
        await response.send(_line({"type": "error", "error": exc.message}))
    except OSError:
        return None  # the client went away
    await response.eof()
    return None


def _line(value: dict) -> bytes:
    return orjson.dumps(value) + b"\n"


def _ending(app) -> asyncio.Event:
    return app.ctx.observability_ending


@bp.listener("before_server_start")
async def make_ending(app):
    app.ctx.observability_ending = asyncio.Event()


@bp.listener("before_server_stop")
async def end_watches(app):
    app.ctx.observability_ending.set()  # watches end with the server instead of holding its shutdown

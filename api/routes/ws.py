"""The session WebSocket: replay, then live events, and ordered requests.

The cursor is validated and the subscription made in this blueprint's request
middleware, i.e. before the 101, so a bad ``after`` or an unknown session is a plain
JSON envelope. After the upgrade one task sends events while another serves requests
strictly one at a time, through the same SandboxRuntime calls as the HTTP routes.
The server always ends with a close frame: 1000 session deleted, 1001 server shutdown,
1013 slow subscriber detached (reconnect with ``after``). A client close only
detaches: never EOF, never a stop.
"""
from __future__ import annotations

import asyncio
import logging
from contextlib import contextmanager
from dataclasses import dataclass

import orjson
from sanic import Blueprint, Request
from sanic.exceptions import WebsocketClosed
from websockets.exceptions import ConnectionClosed

from session_supervisor.domain.model.errors import CursorExpiredError, DomainError
from ..journal_wire import json_rows, record_of
from ..wire import parse_cursor, parse_limit

from .. import commands
from ..browser import EchoedConsoleSubprotocol
from .sessions import runtime_of
from ..proxy import bridged, owned_here

log = logging.getLogger(__name__)

bp = Blueprint("session_ws", url_prefix="/api/v1/sandboxes/<sandbox_id>/sessions/<session_id>")

CLOSE_CODES = {"deleted": (1000, "session deleted"), "shutdown": (1001, "server shutdown"),
               "slow": (1013, "subscriber too slow; reconnect with after")}
SHUTDOWN_WAIT_S = 2.0
REPLAY_PAGE = 64  # events per journal read: output events can be 256 KiB each
# The frames a client may send, each to the one runtime call it means (an explicit table:
# no frame type can reach any other method of the runtime).
OPERATIONS = {
    "input": commands.write_input,
    "signal": commands.send_signal,
    "resize": commands.resize,
}
GONE = (ConnectionClosed, WebsocketClosed)  # the peer went away: nothing to report


# ---- open attachments (this route and the AeroLVM attach) ---------------------------------
class Attachments:
    """Open WebSocket handlers of one app: counted per session, closed first on shutdown."""

    def __init__(self) -> None:
        self._open: dict[asyncio.Task, tuple[str, object]] = {}

    @contextmanager
    def track(self, session_id: str, subscriber):
        task = asyncio.current_task()
        self._open[task] = (session_id, subscriber)
        try:
            yield
        finally:
            self._open.pop(task, None)

    def count(self, session_id: str) -> int:
        return sum(1 for sid, _ in self._open.values() if sid == session_id)

    async def close_all(self, timeout: float) -> None:
        for _sid, subscriber in self._open.values():
            subscriber.close("shutdown")
        if self._open:
            await asyncio.wait(list(self._open), timeout=timeout)


def attachments(app) -> Attachments:
    registry = getattr(app.ctx, "attachments", None)
    if registry is None:
        registry = app.ctx.attachments = Attachments()
    return registry


@bp.before_server_stop
async def close_attachments(app):
    # Sanic cancels WebSocket handlers right after the before_server_stop listeners
    # registered before this one; closing our subscribers first lets each handler send
    # its own close frame (1001) instead of Sanic's bare 1000.
    await attachments(app).close_all(SHUTDOWN_WAIT_S)


async def first_done(*coros) -> asyncio.Task:
    """Run the coroutines until one finishes; cancel and reap the rest."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return next(iter(done))


# ---- before the upgrade -----------------------------------------------------------------
@dataclass
class _Subscription:
    runtime: object
    subscriber: object
    after: int
    upto: int
    owned: bool = False  # taken over by the handler once the upgrade succeeded


@bp.on_request(priority=-1)  # after the app-wide bearer auth (priority 0)
async def subscribe_before_upgrade(request: Request):
    """400 bad after/limit; 404; 410 expired cursor: all as JSON envelopes, before the 101."""
    if bridged(request):
        return None
    after = parse_cursor(request.args.get("after"))
    parse_limit(request.args.get("limit"))
    runtime = runtime_of(request, request.match_info["sandbox_id"])
    subscriber, upto = runtime.journal.subscribe(request.match_info["session_id"], after)
    request.ctx.ws_subscription = _Subscription(runtime, subscriber, after, upto)


@bp.on_response
async def release_if_not_upgraded(request: Request, response):
    subscription = getattr(request.ctx, "ws_subscription", None)
    if subscription is not None and not subscription.owned:  # the handshake failed
        subscription.runtime.hub.unsubscribe(subscription.subscriber)


# ---- after the upgrade ------------------------------------------------------------------
@bp.websocket("/ws", ctx_action="attach_session", subprotocols=EchoedConsoleSubprotocol())
@owned_here
async def session_ws(request: Request, ws, sandbox_id: str, session_id: str):
    sub: _Subscription = request.ctx.ws_subscription
    sub.owned = True
    try:
        with attachments(request.app).track(session_id, sub.subscriber):
            await _serve(ws, sub, session_id)
    except asyncio.CancelledError:
        # Sanic cancels handlers at shutdown (then sends 1000; ours says 1001) and when the
        # connection is gone (then this is a no-op).
        ws.end_connection(1001, "server shutdown")
        raise
    except GONE:
        pass
    finally:
        sub.runtime.hub.unsubscribe(sub.subscriber)


async def _serve(ws, sub: _Subscription, session_id: str) -> None:
    try:
        last = await _replay(ws, sub.runtime, session_id, sub.after, sub.upto)
    except CursorExpiredError:  # retention overtook the replay: never skip silently
        await ws.close(1013, "cursor expired during replay; reconnect with after")
        return
    finished = await first_done(_send_live(ws, sub.subscriber, last),
                                _serve_requests(ws, sub.runtime, session_id))
    reason = sub.subscriber.closed_reason
    if not finished.cancelled() and finished.exception() is None and reason:
        code, text = CLOSE_CODES.get(reason, (1000, reason))
        await ws.close(code, text)
    elif not finished.cancelled() and finished.exception() is not None \
            and not isinstance(finished.exception(), GONE):
        log.error("session websocket failed", exc_info=finished.exception())
        await ws.close(1011, "internal error")


async def _replay(ws, runtime, session_id: str, after: int, upto: int) -> int:
    last = after
    while last < upto:  # the committed snapshot taken with the subscription, page by page
        events, read_upto = await runtime.journal.replay(session_id, last, upto, json_rows, REPLAY_PAGE)
        if not read_upto:
            break
        for _seq, _kind, json in events:
            await ws.send(event_frame_of_json(json))
        last = read_upto
    return max(last, upto)


async def _send_live(ws, subscriber, last: int) -> None:
    while True:
        batch = await subscriber.next_batch()
        for entry in batch:
            if entry.seq > last:
                await ws.send(event_frame(record_of(entry)))
                last = entry.seq
        if not batch and subscriber.closed_reason:
            return


async def _serve_requests(ws, runtime, session_id: str) -> None:
    while True:
        try:
            message = await ws.recv()
        except (*GONE, asyncio.CancelledError):  # recv is cancelled when the connection drops
            return
        if message is None:
            continue
        reply = await handle_request(runtime, session_id, message)
        await ws.send(orjson.dumps(reply).decode())


async def handle_request(runtime, session_id: str, raw) -> dict:
    """Exactly one reply per client frame: ack after the operation committed, or error."""
    try:
        message = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return {"type": "error", "error": "invalid JSON message"}
    if not isinstance(message, dict):
        return {"type": "error", "error": "invalid websocket message: expected a JSON object"}
    reply: dict = {"type": "ack"}
    if message.get("request_id") is not None:
        request_id = message["request_id"]
        reply["request_id"] = request_id if isinstance(request_id, str) else orjson.dumps(request_id).decode()
    kind = message.get("type")
    operation = OPERATIONS.get(kind) if isinstance(kind, str) else None
    try:
        if operation is None:
            return {**reply, "type": "error", "error": "unsupported websocket message type"}
        # Shielded: Sanic cancels the handler when the connection drops, and a request
        # already taken off the socket runs to completion (and commits) all the same.
        task = asyncio.ensure_future(operation(runtime, session_id, message))
        task.add_done_callback(retrieve_outcome)
        await asyncio.shield(task)
    except DomainError as exc:
        return {**reply, "type": "error", "error": exc.message}
    except Exception:
        log.exception("websocket %s request failed", kind)
        return {**reply, "type": "error", "error": "internal error"}
    return reply


def retrieve_outcome(task: asyncio.Task) -> None:
    """Mark a shielded task's outcome as seen: its caller may have gone away."""
    if not task.cancelled() and task.exception() is not None \
            and not isinstance(task.exception(), (DomainError, *GONE)):
        log.error("websocket operation failed", exc_info=task.exception())


def event_frame(record: dict) -> str:
    return orjson.dumps({"type": "event", "event": record}).decode()


def event_frame_of_json(json: bytes) -> str:
    """The same frame from the record's JSON (orjson writes a nested object exactly as alone)."""
    return (b'{"type":"event","event":' + json + b"}").decode()

"""Context routes of the Sandbox0 API (``sandbox.run`` / ``cmd`` / ``cmdStream`` in the SDKs).

Paths and bodies are the SDKs' (``apispec/api/contexts``); codes are the reference's:
404 context_not_found, 410 process_finished, 409 process_not_running / pty_unavailable,
408 exec_timeout, 400 invalid_request. The WebSocket sends what the context printed so far,
then live output, then ``{"type": "done", "exit_code", "state"}`` and a 1000 close.
"""
from __future__ import annotations

import asyncio
import logging

import orjson
from sanic import Blueprint, Request

from session_supervisor.domain.context_output import PREVIEW_LIMIT, ExecOutput
from session_supervisor.domain.context_state import INPUT_QUEUE_BYTES
from session_supervisor.domain.model import contexts as model
from session_supervisor.domain.model.errors import DomainError, InvalidRequestError
from session_supervisor.domain.model.json_fields import body_object
from session_supervisor.domain.model.signals import parse_signal
from session_supervisor.domain.model.timefmt import rfc3339

from ..schemas import ok, parse_json
from .sessions import runtime_of
from .ws import GONE, first_done
from ..proxy import bridged, owned_here

log = logging.getLogger(__name__)

bp = Blueprint("contexts", url_prefix="/api/v1/sandboxes/<sandbox_id>/contexts")


def contexts(request: Request, sandbox_id: str):
    return runtime_of(request, sandbox_id).contexts


def render_context(context, output=None, *, preview: bool = False) -> dict:
    """The SDKs' Context; ``output`` (an ExecOutput) for a create that waited; ``preview``: the list's
    form, with at most the last PREVIEW_LIMIT characters of each stream (``output_truncated`` says so)."""
    request = context.request
    out = {"id": context.id, "type": request.type, "running": context.running, "paused": False,
           "created_at": rfc3339(context.created_ns), "cwd": request.cwd or "/workspace",
           "env_vars": dict(request.env)}
    if request.alias:
        out["alias"] = request.alias
    if request.type == "cmd":
        out["command"] = list(request.command)
    if output is not None:
        out.update(render_output(output))
    out.update(render_finish(context, preview=preview))
    return out


def render_output(output) -> dict:
    """An exec's output; when it was cut (bounded, oldest first) ``output_truncated`` and the count."""
    out = {"output_raw": output.text}
    if output.truncated:
        out["output_truncated"], out["output_dropped_bytes"] = True, output.dropped
    return out


def render_finish(context, *, preview: bool = False) -> dict:
    """Split output (pipes only) and the final status, once the process has exited."""
    out = {}
    if context.request.type == "cmd" and context.terminal is None:
        if preview:
            (stdout, more_out), (stderr, more_err) = (context.output.tail("stdout", PREVIEW_LIMIT),
                                                      context.output.tail("stderr", PREVIEW_LIMIT))
            if more_out or more_err:
                out["output_truncated"] = True
        else:
            stdout, stderr = context.captured("stdout"), context.captured("stderr")
        if stdout or stderr:
            out["stdout"], out["stderr"] = stdout, stderr
    if context.output.dropped and not preview:
        out["output_truncated"], out["output_dropped_bytes"] = True, context.output.dropped
    if context.exited.is_set():
        out["exit_code"], out["state"] = context.exit_code, context.state
    return out


@bp.get("", ctx_action="list_contexts", strict_slashes=False)
async def list_contexts(request: Request, sandbox_id: str):
    """200 {"contexts": [...]}; 404 not_found (sandbox)."""
    return ok({"contexts": [render_context(c, preview=True) for c in contexts(request, sandbox_id).list()]})


@bp.post("", ctx_action="create", strict_slashes=False)
async def create_context(request: Request, sandbox_id: str):
    """201 Context (with output_raw/stdout/stderr/exit_code/state when wait_until_done); 400; 500 create_failed."""
    context_request = model.parse_create_context(parse_json(request))
    context, output = await contexts(request, sandbox_id).create(context_request)
    return ok(render_context(context, output if context_request.wait_until_done else ExecOutput("")), 201)


@bp.get("/<context_id>", ctx_action="get")
async def get_context(request: Request, sandbox_id: str, context_id: str):
    """200 Context; 404 context_not_found."""
    return ok(render_context(contexts(request, sandbox_id).get(context_id)))


@bp.delete("/<context_id>", ctx_action="delete")
async def delete_context(request: Request, sandbox_id: str, context_id: str):
    """200 {"deleted": true}; 404 context_not_found."""
    await contexts(request, sandbox_id).delete(context_id)
    request.app.ctx.container.release_memory()  # its output goes back to the system, not only to malloc
    return ok({"deleted": True})


@bp.post("/<context_id>/restart", ctx_action="restart")
async def restart_context(request: Request, sandbox_id: str, context_id: str):
    """200 Context (a new process, same request); 404; 500 restart_failed."""
    return ok(render_context(await contexts(request, sandbox_id).restart(context_id)))


@bp.post("/<context_id>/input", ctx_action="write", stream=True)
async def write_input(request: Request, sandbox_id: str, context_id: str):
    """200 {"written": true}; 400 data is required; 404; 409 process_not_running; 410 process_finished;
    429 input_buffer_full (the body is refused before it is read)."""
    ctxs = contexts(request, sandbox_id)
    await bounded_body(request, ctxs, context_id)
    data = model.parse_context_input(parse_json(request))
    await ctxs.write(context_id, data)
    return ok({"written": True})


@bp.post("/<context_id>/exec", ctx_action="exec", stream=True)
async def exec_input(request: Request, sandbox_id: str, context_id: str):
    """200 {output_raw, output_truncated?, output_dropped_bytes?, stdout?, stderr?, exit_code?, state?};
    400; 404; 408 exec_timeout; 410; 429 input_buffer_full."""
    ctxs = contexts(request, sandbox_id)
    await bounded_body(request, ctxs, context_id)
    data = model.parse_context_input(parse_json(request), required_non_empty=True)
    output = await ctxs.exec(context_id, data)
    return ok({**render_output(output), **render_finish(ctxs.get(context_id))})


async def bounded_body(request: Request, ctxs, context_id: str) -> None:
    """Read a context input's body into ``request.body``, refusing (429) one the context's input
    queue cannot take: by its Content-Length before a byte is read, else as it arrives."""
    length = request.headers.get("content-length", "")
    ctxs.refuse_when_full(context_id, int(length) if length.isdigit() else 0)
    parts, size = [], 0
    while request.stream is not None and (chunk := await request.stream.read()) is not None:
        size += len(chunk)
        if size > INPUT_QUEUE_BYTES:
            ctxs.refuse_when_full(context_id, size)
        parts.append(chunk)
    request.body = b"".join(parts)


@bp.post("/<context_id>/resize", ctx_action="resize")
async def resize(request: Request, sandbox_id: str, context_id: str):
    """200 {"resized": true}; 400 rows and cols must be > 0; 404; 409 pty_unavailable / not running."""
    rows, cols = model.parse_resize(parse_json(request))
    contexts(request, sandbox_id).resize(context_id, rows, cols)
    return ok({"resized": True})


@bp.post("/<context_id>/signal", ctx_action="signal")
async def send_signal(request: Request, sandbox_id: str, context_id: str):
    """200 {"signaled": true}; 400 unsupported signal; 404; 409 process_not_running."""
    contexts(request, sandbox_id).signal(context_id, _signal(body_object(parse_json(request)).get("signal")))
    return ok({"signaled": True})


def _signal(value) -> int:
    try:
        return parse_signal(value if isinstance(value, str) else "")
    except ValueError:
        raise InvalidRequestError("unsupported signal" if value else "signal is required") from None


# ---- the context WebSocket ----------------------------------------------------------------------
@bp.on_request(priority=-1)  # after the app-wide bearer auth (priority 0)
async def find_context_before_upgrade(request: Request):
    """404 context_not_found as a JSON envelope before the 101, as for the session WebSocket."""
    if request.route is not None and request.route.name.endswith("context_ws") and not bridged(request):
        contexts(request, request.match_info["sandbox_id"]).get(request.match_info["context_id"])


@bp.websocket("/<context_id>/ws", ctx_action="context_ws")
@owned_here
async def context_ws(request: Request, ws, sandbox_id: str, context_id: str):
    try:
        ctxs = contexts(request, sandbox_id)
        context, replay, subscriber = ctxs.subscribe(context_id)
    except DomainError as exc:  # the reference upgrades, then closes with the reason
        await ws.close(1000, exc.message)
        return
    pending: list[str] = []  # request ids of REPL inputs waiting for their prompt
    try:
        for source, text in replay:
            await ws.send(_frame({"type": "output", "source": source, "data": text}))
        await first_done(_send_live(ws, context, subscriber, pending), _serve_inputs(ws, ctxs, context, pending))
    except GONE:
        pass
    finally:
        context.subscribers.discard(subscriber)


async def _send_live(ws, context, subscriber, pending: list[str]) -> None:
    while True:
        kind, source, text, prompt = await subscriber.get()
        if kind == "dropped":
            await ws.close(1013, "subscriber too slow")
            return
        if kind == "exit":
            await ws.send(_frame({"type": "done", "exit_code": context.exit_code, "state": context.state}))
            await ws.close(1000, "context finished")
            return
        await ws.send(_frame({"type": "output", "source": source, "data": text}))
        if prompt and pending:
            await ws.send(_frame({"type": "done", "request_id": pending.pop(0)}))


async def _serve_inputs(ws, ctxs, context, pending: list[str]) -> None:
    while True:
        try:
            raw = await ws.recv()
        except (*GONE, asyncio.CancelledError):  # the client went away: nobody left to send to
            return
        if raw is None:
            continue
        try:
            await _apply(ctxs, context, raw, pending)
        except (DomainError, ValueError) as exc:  # the reference logs and carries on
            log.debug("context %s websocket message ignored: %s", context.id, exc)


async def _apply(ctxs, context, raw, pending: list[str]) -> None:
    try:
        message = orjson.loads(raw)
    except orjson.JSONDecodeError:
        message = None
    if not isinstance(message, dict) or not message.get("type"):
        await ctxs.write(context.id, raw if isinstance(raw, str) else raw.decode("utf-8", "replace"))
        return
    kind = message["type"]
    if kind == "resize":
        rows, cols = model.parse_resize(message)
        ctxs.resize(context.id, rows, cols)
    elif kind == "signal":
        ctxs.signal(context.id, _signal(message.get("signal")))
    elif kind == "input":
        if message.get("request_id") and context.request.type == "repl":
            pending.append(str(message["request_id"]))
        if message.get("data"):
            await ctxs.write(context.id, str(message["data"]))


def _frame(payload: dict) -> str:
    return orjson.dumps(payload).decode()

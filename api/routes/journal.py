"""Journal routes: paged events and the SSE stream."""
from __future__ import annotations

from sanic import Blueprint, Request

from session_supervisor.domain.model.errors import CursorExpiredError
from ..journal_wire import json_rows, record_of
from ..wire import parse_cursor, parse_limit

from ..schemas import ok_events_page
from ..sse import HEARTBEAT_S, heartbeat_frame, sse_frame, sse_frames
from .sessions import runtime_of

bp = Blueprint("journal", url_prefix="/api/v1/sandboxes/<sandbox_id>/sessions/<session_id>")


@bp.get("/events", ctx_action="list_session_events")
async def list_events(request: Request, sandbox_id: str, session_id: str):
    """200 {"events", "cursor"}; 400 bad after/limit or after > latest; 404; 410 event_cursor_expired."""
    after = parse_cursor(request.args.get("after"))
    limit = parse_limit(request.args.get("limit"))
    (events, _last), (earliest, latest) = await runtime_of(request, sandbox_id).journal.events_page(
        session_id, after, limit, json_rows)
    return ok_events_page(events, earliest, latest)


async def send_frames(response, frames: list[bytes], chunk: int = 1 << 20) -> None:
    """Frames in writes of about ``chunk`` bytes: a batch of large output events is never
    joined into one buffer at once."""
    parts, size = [], 0
    for frame in frames:
        parts.append(frame)
        size += len(frame)
        if size >= chunk:
            await response.send(b"".join(parts))
            parts, size = [], 0
    if parts:
        await response.send(b"".join(parts))


def stream_cursor(request: Request) -> int:
    header = request.headers.get("last-event-id", "")
    if header.strip():  # a non-empty Last-Event-ID wins over ?after=
        return parse_cursor(header.strip(), "Last-Event-ID")
    return parse_cursor(request.args.get("after"))


@bp.get("/events/stream", ctx_action="stream_session_events")
async def stream_events(request: Request, sandbox_id: str, session_id: str):
    """200 text/event-stream: replay after the cursor, then live; 400; 404; 410 before the stream."""
    after = stream_cursor(request)
    parse_limit(request.args.get("limit"))
    runtime = runtime_of(request, sandbox_id)
    subscriber, upto = runtime.journal.subscribe(session_id, after)
    try:
        response = await request.respond(
            content_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        last = after
        try:
            while last < upto:  # replay the committed snapshot, page by page
                events, read_upto = await runtime.journal.replay(session_id, last, upto, json_rows)
                if not read_upto:
                    break
                await send_frames(response, sse_frames(events))
                last = read_upto
        except CursorExpiredError:  # trimming overtook the replay: end; the reconnect gets 410
            await response.eof()
            return
        last = max(last, upto)
        # Caught up: say so (and flush the headers even when there was nothing to replay).
        await response.send(heartbeat_frame(last))
        while True:
            batch = await subscriber.next_batch(HEARTBEAT_S)
            fresh = [entry for entry in batch if entry.seq > last]
            if fresh:
                await send_frames(response, [sse_frame(record_of(entry)) for entry in fresh])
                last = fresh[-1].seq
            elif subscriber.closed_reason:
                break
            elif not batch:
                await response.send(heartbeat_frame(runtime.store.committed_seq.get(session_id, last)))
        await response.eof()
    finally:
        runtime.hub.unsubscribe(subscriber)

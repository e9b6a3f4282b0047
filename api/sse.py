"""SSE framing: one block per event, comments for heartbeats."""
from __future__ import annotations

import orjson

from session_supervisor.domain.ports import PublicJson

HEARTBEAT_S = 15.0


def event_frame(seq: int, kind: str, json: bytes) -> bytes:
    return b"id: %d\nevent: %b\ndata: %b\n\n" % (seq, kind.encode(), json)


def sse_frame(record: dict) -> bytes:
    return event_frame(record["seq"], record["type"], orjson.dumps(record))


def sse_frames(events: list[PublicJson]) -> list[bytes]:
    """Frames of events the store rendered as JSON (SSE replay)."""
    return [event_frame(seq, kind, json) for seq, kind, json in events]


def heartbeat_frame(latest: int) -> bytes:
    # The current latest seq lets an idle client tell that its cursor is current.
    return b": heartbeat %d\n\n" % latest

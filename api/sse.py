"""SSE framing (contract §4): one block per event, comments for heartbeats."""
from __future__ import annotations

import orjson

HEARTBEAT_S = 15.0


def sse_frame(record: dict) -> bytes:
    return b"id: %d\nevent: %s\ndata: %s\n\n" % (
        record["seq"], record["type"].encode(), orjson.dumps(record))


def heartbeat_frame(latest: int) -> bytes:
    # The current latest seq lets an idle client tell that its cursor is current.
    return b": heartbeat %d\n\n" % latest

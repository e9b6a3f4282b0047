"""Retention marks (kept in the small aggregate state): what a session's journal window holds, kept in the aggregate.

An event's logical size is the length of its public JSON plus one (what ``max_bytes`` counts).
Every applied event is added to the marks, so a replay from snapshot plus tail
rebuilds them exactly. Marks are segments ``[last_seq, bytes, first_ns, last_ns]``
of consecutive events; a segment is closed once it holds 1/SEGMENTS of either
limit, so the cutoff is found by popping whole segments from the head: no scan of
the store and no timestamp decoding. The window after a trim is within one
segment of ``max_bytes``.

``earliest_seq`` lives only in the aggregate state: a trim advances it in memory,
a snapshot persists it, and only then are stored rows below it deleted. So after
a restart ``earliest`` is never lower than what was physically removed.
"""
from __future__ import annotations

import json

from . import events as ev
from .journal import OUTPUT_TOPIC, public_fields

SEGMENTS = 64
MIN_CHUNK = 4 * 1024
_NS = 1_000_000_000


def _json_len(value) -> int:
    if type(value) is str:
        if value.isascii() and value.isprintable() and '"' not in value and "\\" not in value:
            return len(value) + 2
        return len(json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    return len(str(value))


def _timestamp_len(timestamp) -> int:
    """Length of ``rfc3339(timestamp)`` without formatting it (trailing zeros trimmed)."""
    micros = timestamp.microsecond
    if not micros:
        return 20
    return 21 + len(f"{micros:06d}".rstrip("0"))


_OCCURRED_AT = len("occurred_at") + 3 + 2  # its key, quotes and colon, and its value's quotes


def logical_size(session_id: str, event) -> int:
    """``len(public JSON) + 1`` of a session event, without base64-encoding its output."""
    record = public_fields(session_id, event.originator_version, event.TOPIC, vars(event))
    data = record.get("data_base64") if event.TOPIC == OUTPUT_TOPIC else None
    if data is not None:
        record["data_base64"] = ""  # its base64 length is added below
    size = 1 + len(record) + 1  # braces and commas (``occurred_at`` is one more field)
    for key, value in record.items():
        size += len(key) + 3 + _json_len(value)  # quotes and colon
    size += _OCCURRED_AT + _timestamp_len(event.timestamp)
    if data:
        size += 4 * ((len(data) + 2) // 3)
    return size + 1  # the JSONL newline


def account(session, event) -> None:
    """Add one applied event to the window total and to the open segment."""
    size = logical_size(session.id, event)
    at_ns = ev.ns_of(event.timestamp)
    seq = event.originator_version
    session.retained_bytes += size
    session.journal_bytes = getattr(session, "journal_bytes", 0) + size
    marks = session.retention_marks
    limits = session.spec["event_retention"]
    if marks:
        last = marks[-1]
        if last[1] < limits["max_bytes"] // SEGMENTS \
                and at_ns - last[2] < limits["max_age_seconds"] * _NS // SEGMENTS:
            last[0] = seq
            last[1] += size
            last[3] = at_ns
            return
    marks.append([seq, size, at_ns, at_ns])


def trim(session, committed_seq: int, now_ns: int) -> bool:
    """Drop head segments older than max_age, then while over max_bytes; True if any.

    Only committed events can be trimmed: their rows exist, so deleting them later
    is exact. ``earliest_seq`` becomes the seq after the last dropped segment
    (``latest + 1`` when everything went, as the Session resource's cursor shows it).
    """
    limits = session.spec["event_retention"]
    oldest_ns = now_ns - limits["max_age_seconds"] * _NS
    max_bytes = limits["max_bytes"]
    marks = session.retention_marks
    dropped = 0
    while dropped < len(marks):
        last_seq, size, _first_ns, last_ns = marks[dropped]
        if last_seq > committed_seq:
            break
        if last_ns > oldest_ns and session.retained_bytes <= max_bytes:
            break
        session.retained_bytes -= size
        session.earliest_seq = last_seq + 1
        dropped += 1
    if dropped:
        del marks[:dropped]
    return dropped > 0


def chunk_limit(spec: dict, default: int) -> int:
    """Largest output event for this session: small budgets get small chunks.

    Trimming is event-granular, so a 256 KiB budget filled with 256 KiB chunks
    would hold nothing; 1/16 of the budget keeps a window of about 16 events.
    """
    return min(default, max(MIN_CHUNK, spec["event_retention"]["max_bytes"] // 16))

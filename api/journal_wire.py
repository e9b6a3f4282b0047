"""The public journal on the wire: every journal record the API sends is rendered here.

Two paths, one result. The object path (``public_record``) encodes the domain's public fields
(``domain.model.journal.public_fields``): the output's bytes as base64, the time as RFC 3339;
live events (``record_of``: SSE, the WebSocket) and the audit views take it. The stored-row fast
path (``json_rows``) is what journal pages and SSE replay send: replay is bounded by the one core
the server has for Python, and output events, most of any journal, are written as JSON bytes in
one step from their stored frame (one bytes format per event, the quoted ids cached per page),
never through a record dict: half the cost. ``tests/api/test_journal_json.py`` pins the two paths
to each other, byte for byte.

The journal stores hand over raw rows (``domain.ports.RawRows``: seq, topic, stored state, and the
store's codec); the fast path knows the codec's output frame (``infra.codec.output_fields``).
"""
from __future__ import annotations

from binascii import b2a_base64
from typing import Any

import orjson

from session_supervisor.domain.model.journal import OUTPUT_TOPIC, PUBLIC_TYPE, JournalEntry, public_fields
from session_supervisor.domain.model.timefmt import rfc3339
from session_supervisor.domain.ports import PublicJson, RawRows
from session_supervisor.infra.codec import output_fields

_OUTPUT = (b'{"seq":%d,"session_id":%b,"runtime_generation":%d,%b"type":"output","stream":%b,'
           b'"data_base64":"%b","occurred_at":"%b%bZ"}')


# ---- the object path --------------------------------------------------------------------------
def public_record(session_id: str, seq: int, topic: str, state: dict, occurred_at: str) -> dict[str, Any]:
    """One stored event as the public Event object."""
    record = public_fields(session_id, seq, topic, state)
    if topic == OUTPUT_TOPIC:
        record["data_base64"] = b2a_base64(record["data_base64"], newline=False).decode("ascii")
    record["occurred_at"] = occurred_at
    return record


def record_of(entry: JournalEntry) -> dict[str, Any]:
    """A live event's public record, made once however many subscribers send it."""
    if entry.rendered is None:
        entry.rendered = public_record(entry.session_id, entry.seq, entry.topic, entry.state, rfc3339(entry.at))
    return entry.rendered


# ---- the stored-row fast path --------------------------------------------------------------------
class _Quoted(dict):
    """A str, or UTF-8 bytes from an output frame -> its JSON string bytes, each computed once
    per page (ids repeat on every row)."""

    def __missing__(self, text) -> bytes:
        quoted = self[text] = orjson.dumps(text.decode() if type(text) is bytes else text)
        return quoted


class _AttemptFields(dict):
    """attempt id (str or UTF-8) -> its ``"attempt_id":"…",`` field (none outside an attempt)."""

    def __missing__(self, attempt_id) -> bytes:
        text = attempt_id.decode() if type(attempt_id) is bytes else attempt_id
        field = self[attempt_id] = b'"attempt_id":%b,' % orjson.dumps(text) if text else b""
        return field


class _Seconds(dict):
    """Whole second -> ``YYYY-MM-DDTHH:MM:SS`` as bytes (a page spans few seconds)."""

    def __missing__(self, second: int) -> bytes:
        text = self[second] = rfc3339(second * 1_000_000_000)[:-1].encode()  # without the "Z"
        return text


def _output_fields(state: bytes, decode_record):
    """``(time µs, generation, stream, attempt id, bytes)`` of an output row, from its fixed
    frame without a dict; from an older ``B`` frame through the codec; None for a shape the
    bytes format does not cover (the object path takes it)."""
    if state[:1] == b"O":
        return output_fields(state)
    fields = decode_record(state)
    if fields.get("reason") or type(fields["generation"]) is not int:
        return None
    return fields.get("__ts", 0), fields["generation"], fields["stream"], fields["attempt_id"], fields["data"]


def json_rows(session_id: str, raw: RawRows) -> tuple[list[PublicJson], int]:
    """``(seq, public type, JSON)`` of each public event among the raw rows, and the seq of the
    last row read (0 for none): a page of rows none of which is public still moves a reader on."""
    decode_record = raw.decode
    quoted, attempts, seconds = _Quoted(), _AttemptFields(), _Seconds()
    session = quoted[session_id]
    rendered: list[PublicJson] = []
    append = rendered.append
    for seq, topic, state in raw.rows:
        kind = PUBLIC_TYPE.get(topic)
        if kind is None:
            continue
        output = _output_fields(state, decode_record) if topic == OUTPUT_TOPIC else None
        if output is not None:
            micros, generation, stream, attempt_id, data = output
            second, micros = divmod(micros, 1_000_000)  # RFC 3339 as ``rfc3339`` writes it
            append((seq, kind, _OUTPUT % (
                seq, session, generation, attempts[attempt_id], quoted[stream], b2a_base64(data, newline=False),
                seconds[second], (b".%06d" % micros).rstrip(b"0") if micros else b"")))
            continue
        fields = decode_record(state)
        occurred = rfc3339(fields.pop("__ts", 0) * 1000)
        append((seq, kind, orjson.dumps(public_record(session_id, seq, topic, fields, occurred))))
    return rendered, raw.last

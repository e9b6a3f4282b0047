"""The public journal as JSON bytes, straight from stored rows (the replay rate).

``domain.model.journal.public_record`` defines the public Event object. Journal pages
and SSE replay used to decode every row into a ``StoredRow``, build that dict, then serialize
it: about 4 µs an event, on the one core the server has for Python. Output events are most of
any journal, so for them this module writes the very same bytes in one step from the decoded
fields (one bytes format per event, the quoted ids cached per page): half the cost. Every
other event goes through ``public_record`` and orjson. ``tests/api/test_journal_json.py`` pins
both to ``orjson.dumps(public_record(...))``, byte for byte.

Both journal stores (SQLite, PostgreSQL) read raw ``(version, topic, state)`` rows and hand
them here with their codec's ``decode_record``.
"""
from __future__ import annotations

from binascii import b2a_base64
from typing import Callable

import orjson

from session_supervisor.domain.model.journal import OUTPUT_TOPIC, PUBLIC_TYPE, public_record
from session_supervisor.domain.model.timefmt import rfc3339
from session_supervisor.domain.ports import PublicJson

from .codec import output_fields

_OUTPUT = (b'{"seq":%d,"session_id":%b,"runtime_generation":%d,%b"type":"output","stream":%b,'
           b'"data_base64":"%b","occurred_at":"%b%bZ"}')


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


def _output_fields(state: bytes, decode_record: Callable[[bytes], dict]):
    """``(time µs, generation, stream, attempt id, bytes)`` of an output row, from its fixed
    frame without a dict; from an older ``B`` frame through the codec; None for a shape the
    bytes format does not cover (the one renderer takes it)."""
    if state[:1] == b"O":
        return output_fields(state)
    fields = decode_record(state)
    if fields.get("reason") or type(fields["generation"]) is not int:
        return None
    return fields.get("__ts", 0), fields["generation"], fields["stream"], fields["attempt_id"], fields["data"]


def render_rows(session_id: str, rows: list, decode_record: Callable[[bytes], dict]) -> tuple[list[PublicJson], int]:
    """``(seq, public type, JSON)`` of each public event among raw ``(version, topic, state)``
    rows, and the seq of the last row read (0 for none): a page of rows none of which is
    public still moves a reader on."""
    quoted, attempts, seconds = _Quoted(), _AttemptFields(), _Seconds()
    session = quoted[session_id]
    rendered: list[PublicJson] = []
    append = rendered.append
    for seq, topic, state in rows:
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
    return rendered, rows[-1][0] if rows else 0

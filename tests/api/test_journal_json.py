"""Pages and SSE replay render stored rows straight to JSON bytes (api.journal_wire.json_rows): those bytes
must be exactly what the one renderer (``public_record``) and orjson gave before."""
from __future__ import annotations

import orjson
import pytest

from session_supervisor.api.schemas import ok, ok_events_page
from session_supervisor.api.sse import sse_frame, sse_frames
from session_supervisor.domain.model import events as ev
from session_supervisor.domain.model.event_base import timestamp_of
from session_supervisor.domain.model.session import Session
from session_supervisor.domain.model.spec import normalize_spec
from session_supervisor.domain.ports import StoredRow
from session_supervisor.domain.model.journal import PUBLIC_TYPE
from session_supervisor.api.journal_wire import json_rows, public_record
from session_supervisor.domain.model.timefmt import rfc3339
from session_supervisor.infra.codec import OrjsonTranscoder
from session_supervisor.infra.event_store import SqliteJournal
from session_supervisor.domain.ports import RawRows
from tests.helpers import read_public_json

T0 = 1_780_000_000_123_456_000  # ns


def a_long_history() -> Session:
    """Every kind of event a session stores, output of every shape among them."""
    s = Session.create("ses-json-1", "sb-x", normalize_spec({"command": ["/bin/cat"]}), "k", 1, T0)
    s.begin_attempt("att-json-1", "created", 1, T0 + 1000)
    s.record_started(4242, 99, T0 + 2000)
    s.record_ready(T0 + 3000)
    s.record_output("stdout", b"hello\n" * 400, T0 + 4_000)       # zstd-compressed when stored
    s.record_output("stderr", bytes(range(256)), T0 + 5_000_000)   # binary, a whole millisecond
    s.record_output("stdout", b"", T0 + 6_000_000_000)             # empty, a whole second later
    s.record_output("stdout", "é\u2028\"\\</script>".encode(), T0 + 6_000_000_001)
    s.accept_input("i1", "digest", T0 + 7000, 3, True)
    s.record_signal(15, "terminated", T0 + 8000)
    s.record_resize(40, 120, T0 + 9000)
    s.begin_stop("desired_state_stopped", T0 + 10_000)
    s.record_exit(None, 15, T0 + 11_000)
    s.set_desired_state("running", T0 + 12_000)
    s.begin_attempt("att-json-2", "restart_policy", 2, T0 + 13_000)
    s.record_started(4243, 100, T0 + 14_000)
    s.record_output("pty", b"\x1b[31mred\x1b[0m\r\n", T0 + 15_000)
    s.freeze(T0 + 16_000)
    s.thaw(T0 + 17_000)
    s.record_exit(3, None, T0 + 18_000)
    return s


def public_records(session_id: str, rows: list[StoredRow]) -> list[dict]:
    """What pages and SSE sent before: the one renderer's record of each public row."""
    return [public_record(session_id, row.seq, row.topic, row.state, rfc3339(row.occurred_ns))
            for row in rows if row.topic in PUBLIC_TYPE]


@pytest.fixture
def journal(tmp_path):
    journal = SqliteJournal(tmp_path / "state")
    session = a_long_history()
    outcome = journal.commit(session.collect_events(), [])
    assert outcome.store_error is None and not outcome.rolled_back
    yield journal
    journal.close()


def test_a_page_of_every_kind_of_event_is_byte_for_byte_what_the_one_renderer_gave(journal):
    rows = journal.read_rows("ses-json-1", 0, 10**6, 10_000)
    assert {row.topic for row in rows} >= {ev.Output.TOPIC, ev.InputAccepted.TOPIC, ev.AttemptExited.TOPIC,
                                           ev.SignalSent.TOPIC, ev.TerminalResized.TOPIC, ev.Paused.TOPIC}
    records = public_records("ses-json-1", rows)
    events, last = read_public_json(journal, "ses-json-1", 0, 10**6, 10_000)
    assert last == rows[-1].seq
    assert [(seq, kind) for seq, kind, _json in events] == [(r["seq"], r["type"]) for r in records]
    assert [json for _seq, _kind, json in events] == [orjson.dumps(record) for record in records]
    cursor = {"earliest": 1, "latest": last}
    assert ok_events_page(events, 1, last).body == ok({"events": records, "cursor": cursor}).body


def test_sse_replay_frames_are_byte_for_byte_the_frames_of_the_public_records(journal):
    rows = journal.read_rows("ses-json-1", 3, 20, 10)
    events, last = read_public_json(journal, "ses-json-1", 3, 20, 10)
    assert last == rows[-1].seq == 13
    assert sse_frames(events) == [sse_frame(record) for record in public_records("ses-json-1", rows)]


def render_rows(session_id: str, rows: list, decode) -> tuple[list, int]:
    """Raw rows as a journal store hands them over, rendered by the fast path."""
    return json_rows(session_id, RawRows(rows, rows[-1][0] if rows else 0, decode))


def raw(row: StoredRow) -> tuple[int, str, bytes]:
    return row.seq, row.topic, OrjsonTranscoder().encode({"timestamp": timestamp_of(row.occurred_ns), **row.state})


@pytest.mark.parametrize("state", [
    {"generation": 3, "attempt_id": "", "stream": "stdout", "data": b"x"},        # no attempt: omitted
    {"generation": 3, "attempt_id": None, "stream": "stdout", "data": b"x"},
    {"generation": 3, "attempt_id": "att-1", "stream": "stdout", "data": b"x", "reason": "truncated"},
    {"generation": 3, "attempt_id": "att-1", "stream": "stdout", "data": b"x", "reason": ""},
    {"generation": True, "attempt_id": "att-1", "stream": "stdout", "data": b"x"},  # not an int: slow path
    {"generation": 3, "attempt_id": "att-\"q\"\n", "stream": "std\tout", "data": b"\x00" * 3},
])
def test_output_rows_of_unusual_shapes_render_as_the_one_renderer_does(state):
    row = StoredRow(9, ev.Output.TOPIC, state, T0)
    decode = OrjsonTranscoder().decode_record
    ((seq, kind, json),), last = render_rows('ses-"odd"', [raw(row)], decode)
    assert (seq, kind, last) == (9, "output", 9)
    assert json == orjson.dumps(public_records('ses-"odd"', [row])[0])


def test_output_rows_in_the_fixed_frame_and_in_the_generic_one_render_the_same_bytes():
    decode = OrjsonTranscoder().decode_record
    codec = OrjsonTranscoder()
    for fields in ({"generation": 2, "attempt_id": "att-1", "stream": "stdout", "data": b"hi\n"},
                   {"generation": 0, "attempt_id": "", "stream": "pty", "data": bytes(range(256)) * 9}):
        state = {"timestamp": timestamp_of(T0 + 789_000), **fields}
        fixed, generic = codec.encode(state), codec.encode_generic(state)
        assert (fixed[:1], generic[:1]) == (b"O", b"B")
        row = StoredRow(5, ev.Output.TOPIC, fields, T0 + 789_000)
        want = orjson.dumps(public_records("ses-1", [row])[0])
        assert render_rows("ses-1", [(5, ev.Output.TOPIC, fixed)], decode)[0][0][2] == want
        assert render_rows("ses-1", [(5, ev.Output.TOPIC, generic)], decode)[0][0][2] == want


def test_rows_without_a_public_type_are_left_out_but_still_move_the_reader_on():
    decode = OrjsonTranscoder().decode_record
    assert render_rows("ses-1", [raw(StoredRow(4, "supervisor.Unknown", {}, T0))], decode) == ([], 4)
    assert render_rows("ses-1", [], decode) == ([], 0)

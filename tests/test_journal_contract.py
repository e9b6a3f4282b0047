"""Every stored Session event has one public type, round-trips through the codec, and renders as pinned."""
from __future__ import annotations

import inspect
import os
import struct

import orjson
import pytest

from session_supervisor.domain.model import events as ev
from session_supervisor.api.journal_wire import public_record
from session_supervisor.domain.model.journal import PUBLIC_TYPE
from session_supervisor.domain.model.session import Session
from session_supervisor.domain.model.spec import normalize_spec
from session_supervisor.infra.codec import OrjsonTranscoder

T0 = 1_780_000_000_123_456_000  # ns


def session_event_classes():
    return [cls for _, cls in inspect.getmembers(ev, inspect.isclass)
            if issubclass(cls, ev.SessionEvent) and cls is not ev.SessionEvent]


def test_every_session_event_class_has_exactly_one_public_type():
    classes = session_event_classes()
    assert sorted(cls.TOPIC for cls in classes) == sorted(PUBLIC_TYPE)


def a_session_with_history() -> Session:
    s = Session.create("ses-00000000-001", "sb-x", normalize_spec({"command": ["/bin/cat"]}), "k", 1, T0)
    s.begin_attempt("att-00000000-001", "created", 1, T0 + 1000)
    s.record_started(4242, 99, T0 + 2000)
    s.record_ready(T0 + 3000)
    s.record_output("stdout", b"hello\n" * 400, T0 + 4000)
    s.accept_input("i1", "digest", T0 + 5000, 3, True)
    s.record_signal(15, "terminated", T0 + 6000)
    s.begin_stop("desired_state_stopped", T0 + 7000)
    s.record_exit(None, 15, T0 + 8000)
    return s


def test_an_input_receipt_stored_before_bytes_and_eof_existed_still_renders():
    state = {"generation": 1, "attempt_id": "att-1", "input_id": "i0", "digest": "d"}
    record = public_record("ses-1", 7, ev.InputAccepted.TOPIC, state, "T")
    assert record["input_id"] == "i0" and "bytes" not in record and "eof" not in record


def test_a_resize_shows_its_size():
    state = {"generation": 1, "attempt_id": "att-1", "rows": 40, "cols": 120}
    record = public_record("ses-1", 8, ev.TerminalResized.TOPIC, state, "T")
    assert (record["rows"], record["cols"]) == (40, 120)


def test_every_event_survives_the_codec_round_trip_with_raw_bytes():
    codec = OrjsonTranscoder()
    for event in a_session_with_history().collect_events():
        state = dict(vars(event))
        decoded = codec.decode(codec.encode(state))
        assert decoded == state


def test_large_output_is_stored_compressed_but_decodes_to_the_same_bytes():
    codec = OrjsonTranscoder()
    data = b"log line\n" * 10_000
    stored = codec.encode({"stream": "stdout", "data": data, "timestamp": ev.timestamp_of(T0)})
    assert len(stored) < len(data) / 10
    assert codec.decode(stored)["data"] == data


def test_incompressible_output_is_stored_raw_and_decodes_to_the_same_bytes():
    codec = OrjsonTranscoder()
    data = os.urandom(256 * 1024)
    stored = codec.encode({"stream": "stdout", "data": data, "timestamp": ev.timestamp_of(T0)})
    (size,) = struct.unpack_from(">I", stored, 1)
    assert orjson.loads(stored[5:5 + size])["__blobs__"] == [["data", len(data), 0]]
    assert codec.decode(stored)["data"] == data


def test_output_that_compresses_only_in_its_middle_is_still_compressed():
    codec = OrjsonTranscoder()
    data = os.urandom(4096) + b"log line\n" * 30_000 + os.urandom(4096)
    stored = codec.encode({"stream": "stdout", "data": data, "timestamp": ev.timestamp_of(T0)})
    assert len(stored) < len(data) / 5
    assert codec.decode(stored)["data"] == data


def render(event) -> dict:
    return public_record(event.originator_id, event.originator_version, event.TOPIC, vars(event), "T")


def test_public_records_are_pinned_per_event_type():
    records = [render(e) for e in a_session_with_history().collect_events()]
    assert records[0] == {"seq": 1, "session_id": "ses-00000000-001", "runtime_generation": 1,
                          "type": "session.created", "occurred_at": "T"}
    assert records[1] == {"seq": 2, "session_id": "ses-00000000-001", "runtime_generation": 1,
                          "attempt_id": "att-00000000-001", "type": "attempt.starting",
                          "reason": "created", "occurred_at": "T"}
    assert [r["type"] for r in records[2:]] == [
        "attempt.started", "session.ready", "output", "input.accepted", "signal.sent",
        "attempt.stopping", "attempt.exited"]
    output = records[4]
    assert output["stream"] == "stdout" and output["data_base64"].startswith("aGVsbG8K")
    assert records[5]["input_id"] == "i1" and records[5]["bytes"] == 3 and records[5]["eof"] is True
    assert "digest" not in records[5]
    assert records[6]["reason"] == "terminated"
    assert records[8] == {"seq": 9, "session_id": "ses-00000000-001", "runtime_generation": 1,
                          "attempt_id": "att-00000000-001", "type": "attempt.exited",
                          "signal": "TERM", "reason": "desired_state_stopped", "occurred_at": "T"}


@pytest.mark.parametrize("delay_ms,reason", [(250, "250ms"), (1000, "1s"), (1500, "1.5s"),
                                             (5000, "5s"), (90_000, "1m30s")])
def test_backoff_reasons_are_go_duration_strings(delay_ms, reason):
    from session_supervisor.domain.model.policies import go_duration
    assert go_duration(delay_ms) == reason


@pytest.mark.parametrize("fields", [
    {"generation": 1, "attempt_id": "att-1", "stream": "stdout", "data": b"hello\n"},
    {"generation": 0, "attempt_id": "", "stream": "stderr", "data": b""},               # no attempt yet
    {"generation": 7, "attempt_id": "att-\u00e9", "stream": "pty", "data": b"z" * 70_000},  # compressed
    {"generation": 2**32 - 1, "attempt_id": "a" * 300, "stream": "s\u2028", "data": os.urandom(2000)},
])
def test_an_output_event_is_stored_in_its_fixed_frame_and_reads_back_whole(fields):
    from session_supervisor.domain.model.event_base import timestamp_of
    codec = OrjsonTranscoder()
    state = {"timestamp": timestamp_of(T0), **fields}
    frame = codec.encode(state)
    assert frame[:1] == b"O" and b"{" not in frame[:20]  # no JSON header to parse on replay
    assert codec.decode(frame) == state
    assert codec.decode_record(frame) == {"__ts": T0 // 1000, **fields}
    assert len(frame) < len(codec.encode_generic(state))


@pytest.mark.parametrize("odd", [
    {"generation": 2**32},                 # beyond the frame's u32
    {"attempt_id": None},
    {"generation": True},
    {"stream": "x" * 256},
])
def test_an_output_event_the_fixed_frame_cannot_hold_takes_the_generic_frame(odd):
    from session_supervisor.domain.model.event_base import timestamp_of
    codec = OrjsonTranscoder()
    state = {"timestamp": timestamp_of(T0), "generation": 1, "attempt_id": "att-1", "stream": "stdout",
             "data": b"x", **odd}
    frame = codec.encode(state)
    assert frame[:1] == b"B"
    assert codec.decode(frame) == state


def test_output_stored_in_the_generic_frame_by_an_earlier_release_still_reads_back():
    from session_supervisor.domain.model.event_base import timestamp_of
    codec = OrjsonTranscoder()
    state = {"timestamp": timestamp_of(T0), "attempt_id": "att-1", "generation": 3, "stream": "stdout",
             "data": b"hello\n" * 400}
    old = codec.encode_generic(state)
    assert old[:1] == b"B"
    assert codec.decode(old) == state

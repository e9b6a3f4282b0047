"""Retention marks in the Session aggregate (domain.model.retention) and snapshots of them."""
from __future__ import annotations

import orjson

from session_supervisor.api.journal_wire import public_record
from session_supervisor.domain.model.retention import SEGMENTS, chunk_limit, logical_size, trim
from session_supervisor.domain.model.session import Session
from session_supervisor.domain.model.spec import normalize_spec
from session_supervisor.domain.model.timefmt import rfc3339
from session_supervisor.domain.retention import take_snapshot
from session_supervisor.infra.journal_common import project as _project

T0 = 1_700_000_000_123_456_789
SEC = 1_000_000_000
KIB = 1024


def new_session(max_bytes=64 * KIB, max_age=3600) -> Session:
    spec = normalize_spec({"command": ["cat"],
                           "event_retention": {"max_bytes": max_bytes, "max_age_seconds": max_age}})
    session = Session.create("ses-12345678-abc", "sb-1", spec, "", 1, T0)
    session.begin_attempt("att-12345678-abc", "created", 1, T0)
    session.record_started(4242, 7, T0 + 1000)
    return session


def rendered_size(session: Session, event) -> int:
    record = public_record(session.id, event.originator_version, event.TOPIC, vars(event),
                           rfc3339(event.timestamp))
    return len(orjson.dumps(record)) + 1


def test_the_logical_size_is_the_public_json_length_plus_one_for_every_kind_of_event():
    session = new_session()
    session.record_ready(T0 + 2000)
    for n in (0, 1, 2, 3, 4, 1000):
        session.record_output("stdout", bytes(range(256)) * 4 + b"x" * n, T0 + 3_000_000 + n)
    session.record_output("stderr", "é\"\\\n".encode() * 10, T0 + 4 * SEC)
    session.accept_input("in-1", "d" * 64, T0 + 5 * SEC)
    session.record_signal(15, "terminated", T0 + 6 * SEC)
    session.begin_stop("desired_state_stopped", T0 + 7 * SEC)
    session.record_exit(-1, 15, T0 + 8 * SEC)
    events = session.collect_events()
    assert len({e.TOPIC for e in events}) >= 9
    for event in events:
        assert logical_size(session.id, event) == rendered_size(session, event), event.TOPIC
    assert session.retained_bytes == sum(rendered_size(session, e) for e in events)


def test_trimming_by_size_keeps_a_window_within_one_segment_of_the_budget():
    session = new_session(max_bytes=64 * KIB)
    for i in range(200):
        session.record_output("stdout", b"a" * 700, T0 + i * 1000)
    assert trim(session, session.version, T0 + SEC)
    assert 64 * KIB - 64 * KIB // SEGMENTS - 1100 < session.retained_bytes <= 64 * KIB
    events = session.collect_events()
    window = [e for e in events if e.originator_version >= session.earliest_seq]
    assert sum(rendered_size(session, e) for e in window) == session.retained_bytes
    assert not trim(session, session.version, T0 + SEC)  # nothing more to do


def test_trimming_never_passes_the_last_committed_event():
    session = new_session(max_bytes=4 * KIB)
    for i in range(20):
        session.record_output("stdout", b"b" * 2000, T0 + i)
    committed = 10
    trim(session, committed, T0 + SEC)
    assert session.earliest_seq <= committed + 1
    trim(session, session.version, T0 + SEC)
    assert session.earliest_seq > committed + 1


def test_trimming_by_age_drops_old_segments_and_can_empty_the_window():
    session = new_session(max_age=64)
    for i in range(10):
        session.record_output("stdout", b"c", T0 + i * 10 * SEC)  # one per 10 s > max_age/64
    trim(session, session.version, T0 + 100 * SEC)  # events at <= 36 s are older than 64 s
    assert session.earliest_seq == 8  # outputs at 40 s and later survive (seq 4 is at 0 s)
    trim(session, session.version, T0 + 1000 * SEC)
    assert session.earliest_seq == session.version + 1 and session.retained_bytes == 0


def test_a_tiny_budget_trims_even_the_newest_event():
    session = new_session(max_bytes=1)
    trim(session, session.version, T0)
    assert session.earliest_seq == session.version + 1


def test_replaying_a_snapshot_and_its_tail_rebuilds_the_same_marks():
    session = new_session(max_bytes=16 * KIB)
    for i in range(30):
        session.record_output("stdout", b"d" * 900, T0 + i * 1000)
    trim(session, session.version, T0 + SEC)
    events = session.collect_events()
    snapshot = take_snapshot(session)
    for i in range(30):
        session.record_output("stderr", b"e" * 1300, T0 + SEC + i)
    tail = session.collect_events()
    restored = _project(None, [snapshot, *tail])
    for key in ("earliest_seq", "retained_bytes", "journal_bytes", "retention_marks", "version"):
        assert getattr(restored, key) == getattr(session, key), key
    assert events  # the trimmed head is not needed: the snapshot carries earliest_seq


def test_a_snapshot_is_detached_from_the_live_aggregate():
    session = new_session()
    snapshot = take_snapshot(session)
    marks = orjson.dumps(snapshot.state["retention_marks"])
    session.record_output("stdout", b"f", T0 + SEC)
    session.accept_input("in-2", "d" * 64, T0 + SEC)
    assert orjson.dumps(snapshot.state["retention_marks"]) == marks
    assert "in-2" not in snapshot.state["receipts"]
    assert not {"_id", "_version", "_pending_events"} & set(snapshot.state)


def test_a_snapshot_round_trips_through_the_storage_codec():
    from session_supervisor.infra.codec import OrjsonTranscoder
    from eventsourcing.persistence import Mapper

    session = new_session()
    session.record_output("stdout", b"g" * 5000, T0 + SEC)
    snapshot = take_snapshot(session)
    mapper = Mapper(transcoder=OrjsonTranscoder())
    restored = mapper.to_domain_event(mapper.to_stored_event(snapshot)).mutate(None)
    for key in ("earliest_seq", "retained_bytes", "retention_marks", "attempts", "spec", "version"):
        assert getattr(restored, key) == getattr(session, key), key


def test_small_budgets_get_small_output_chunks():
    assert chunk_limit({"event_retention": {"max_bytes": 64 * 1024 * 1024}}, 256 * KIB) == 256 * KIB
    assert chunk_limit({"event_retention": {"max_bytes": 256 * KIB}}, 256 * KIB) == 16 * KIB
    assert chunk_limit({"event_retention": {"max_bytes": 1}}, 256 * KIB) == 4 * KIB

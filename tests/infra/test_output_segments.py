"""Output bytes out of line (``infra.output_segments``), on real files through ``SqliteJournal``:
large output events' bytes live in segment files that their rows reference, written and made
durable before the commit; refused commits, crashes, retention, deletion and pause keep the
journal and the files consistent."""
from __future__ import annotations

import os
import random
import threading
import shutil
import sqlite3
from pathlib import Path

import pytest

from session_supervisor.domain.model.journal import LIFECYCLE_TOPICS, OUTPUT_TOPIC
from session_supervisor.domain.model.session import Session
from session_supervisor.domain.model.spec import normalize_spec
from session_supervisor.domain.store_faults import InsufficientStorageError
from session_supervisor.infra import output_segments
from session_supervisor.infra.event_store import SqliteJournal, SqliteJournals
from session_supervisor.infra.output_segments import OUT_OF_LINE_MIN
from session_supervisor.infra.segment_format import REF, REF_LEN, SEGMENTS_DIR, is_ref
from tests.helpers import read_public_json

T0 = 1_780_000_000_000_000_000
SID = "ses-0000000000000001"
KIB = 1024


def a_session(sid: str = SID) -> Session:
    session = Session.create(sid, "sb-x", normalize_spec({"command": ["cat"]}), "", 1, T0)
    session.begin_attempt("att-1", "created", 1, T0 + 1)
    return session


def commit_output(journal: SqliteJournal, session: Session, chunks: list[bytes]) -> None:
    for number, chunk in enumerate(chunks):
        session.record_output("stdout", chunk, T0 + 10 + number)
    outcome = journal.commit(session.collect_events(), [])
    assert outcome.store_error is None, outcome


def output_of(journal: SqliteJournal, sid: str = SID, gt: int = 0, desc: bool = False) -> list[tuple[int, bytes]]:
    rows = journal.read_rows(sid, gt, 10**9, 10**6, frozenset({OUTPUT_TOPIC}), desc=desc)
    return [(row.seq, row.state["data"]) for row in rows]


def stored_states(state_dir: Path, sid: str = SID) -> dict[int, bytes]:
    db = sqlite3.connect(state_dir / "journal.sqlite")
    try:
        return dict(db.execute("SELECT originator_version, state FROM stored_events WHERE originator_id=? "
                               "AND topic=?", (sid, OUTPUT_TOPIC)).fetchall())
    finally:
        db.close()


def segment_files(state_dir: Path, sid: str = SID) -> list[Path]:
    return sorted((state_dir / SEGMENTS_DIR / sid).glob("*.seg"))


@pytest.fixture
def state_dir(tmp_path) -> Path:
    return tmp_path / "state"


def test_large_output_is_written_once_to_a_segment_and_small_output_stays_inline(state_dir):
    journal = SqliteJournal(state_dir)
    session = a_session()
    big, small = os.urandom(256 * KIB), b"hello\n"
    commit_output(journal, session, [big, small, b"z" * (4 * 1024 * KIB)])  # zeros-like: compressed, inline
    states = stored_states(state_dir)
    assert [is_ref(states[seq]) for seq in sorted(states)] == [True, False, False]
    assert len(states[3]) == REF_LEN
    files = segment_files(state_dir)
    assert len(files) == 1 and big in files[0].read_bytes()
    assert [data for _seq, data in output_of(journal)] == [big, small, b"z" * (4 * 1024 * KIB)]
    assert output_of(journal, desc=True)[0][1] == b"z" * (4 * 1024 * KIB)
    journal.close()
    reopened = SqliteJournal(state_dir)
    loaded = reopened.stored_copy(SID)  # the library's repository, through the segment mapper
    assert loaded.version == session.version
    assert [data for _seq, data in output_of(reopened)][0] == big
    reopened.close()


def test_a_blob_below_the_threshold_stays_in_the_row(state_dir):
    journal = SqliteJournal(state_dir)
    commit_output(journal, a_session(), [os.urandom(OUT_OF_LINE_MIN - 1024)])
    assert not any(is_ref(s) for s in stored_states(state_dir).values())
    assert not (state_dir / SEGMENTS_DIR).exists()
    journal.close()


def test_a_refused_commit_takes_its_segment_bytes_back_and_the_retry_stores_the_same_seqs(state_dir, monkeypatch):
    journal = SqliteJournal(state_dir)
    session = a_session()
    first = os.urandom(256 * KIB)
    commit_output(journal, session, [first])
    size_before = segment_files(state_dir)[0].stat().st_size
    second = [os.urandom(300 * KIB) for _ in range(3)]
    for number, chunk in enumerate(second):
        session.record_output("stdout", chunk, T0 + 100 + number)
    events = session.collect_events()

    def full(*_args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(journal, "_insert", full)
    outcome = journal.commit(events, [])
    assert isinstance(outcome.store_error, InsufficientStorageError)
    assert segment_files(state_dir)[0].stat().st_size == size_before  # nothing left behind
    monkeypatch.undo()
    assert journal.commit(events, []).store_error is None  # the held batch, retried whole
    assert [data for _seq, data in output_of(journal)] == [first, *second]
    journal.close()


def test_a_segment_write_that_hits_a_full_disk_is_a_507_and_undone(state_dir, monkeypatch):
    journal = SqliteJournal(state_dir)
    session = a_session()
    commit_output(journal, session, [os.urandom(128 * KIB)])
    size_before = segment_files(state_dir)[0].stat().st_size
    real = os.pwritev

    def fills_up(fd, buffers, offset):
        real(fd, [bytes(buffers[0])[:1000]], offset)  # a short write, then the disk is full
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(output_segments.os, "pwritev", fills_up)
    session.record_output("stdout", os.urandom(128 * KIB), T0 + 50)
    events = session.collect_events()
    assert isinstance(journal.commit(events, []).store_error, InsufficientStorageError)
    assert segment_files(state_dir)[0].stat().st_size == size_before
    monkeypatch.setattr(output_segments.os, "pwritev", real)
    assert journal.commit(events, []).store_error is None
    assert len(output_of(journal)) == 2
    journal.close()


def test_bytes_a_crash_left_after_the_last_commit_are_cut_before_the_next_write(state_dir):
    journal = SqliteJournal(state_dir)
    session = a_session()
    chunks = [os.urandom(200 * KIB) for _ in range(2)]
    commit_output(journal, session, chunks)
    journal.close()
    [segment] = segment_files(state_dir)
    committed_size = segment.stat().st_size
    with open(segment, "ab") as f:  # what a kill -9 between the segment write and the commit leaves
        f.write(os.urandom(400 * KIB))
    later = segment.with_name(f"{session.version + 1:016d}.seg")
    later.write_bytes(os.urandom(50 * KIB))  # ...and a file a rotation in that tick had started

    reopened = SqliteJournal(state_dir)
    assert [data for _s, data in output_of(reopened)] == chunks  # reads need no recovery
    after = os.urandom(100 * KIB)  # shorter than the garbage
    commit_output(reopened, session, [after])
    assert not later.exists()
    _file, offset, length = REF.unpack_from(stored_states(state_dir)[session.version], 1)
    assert offset == committed_size + 12  # right after the last committed record, not the garbage
    assert segment.stat().st_size == offset + length  # and nothing of the garbage after it
    assert [data for _s, data in output_of(reopened)] == [*chunks, after]
    reopened.close()


def test_retention_unlinks_segment_files_once_their_rows_are_deleted(state_dir, monkeypatch):
    monkeypatch.setattr(output_segments, "SEGMENT_BYTES", 1024 * KIB)
    journal = SqliteJournal(state_dir)
    session = a_session()
    chunks = [os.urandom(256 * KIB) for _ in range(24)]
    for start in range(0, len(chunks), 4):
        commit_output(journal, session, chunks[start:start + 4])
    assert len(segment_files(state_dir)) == 6
    through = 2 + 16  # the first 16 output events (seqs 3..18)
    assert journal.trim_events(SID, 0, through, LIFECYCLE_TOPICS, 1000) == 16
    remaining = segment_files(state_dir)
    assert len(remaining) == 2, remaining  # 4 files held only trimmed rows
    assert [data for _s, data in output_of(journal)] == chunks[16:]
    journal.trim_events(SID, through, session.version, LIFECYCLE_TOPICS, 1000)
    assert len(segment_files(state_dir)) == 1  # the newest file is kept: it is appended to
    journal.close()


def test_a_reader_whose_segment_was_unlinked_gets_fewer_rows_never_other_bytes(state_dir, monkeypatch):
    monkeypatch.setattr(output_segments, "SEGMENT_BYTES", 512 * KIB)
    journal = SqliteJournal(state_dir)
    session = a_session()
    chunks = [os.urandom(256 * KIB) for _ in range(6)]
    commit_output(journal, session, chunks)
    files = segment_files(state_dir)
    assert len(files) == 3
    files[0].unlink()  # retention won the race after the rows were read
    got = output_of(journal)
    assert [data for _s, data in got] == chunks[2:]
    assert [data for _s, data in output_of(journal, desc=True)] == chunks[:1:-1]
    # A reference that points at another record reads as gone, not as that record's bytes.
    states = stored_states(state_dir)
    files[1].rename(files[2].with_name("moved"))
    shutil.copy(files[2], files[1])
    assert [seq for seq, _data in output_of(journal)] == sorted(states)[4:]
    journal.close()


def test_deleting_a_stream_and_removing_a_sandbox_delete_their_segments(tmp_path):
    state_of = lambda sandbox_id: tmp_path / sandbox_id / "state"  # noqa: E731
    journals = SqliteJournals(state_of, tmp_path)
    journal = journals.open("sb-1")
    commit_output(journal, a_session(), [os.urandom(100 * KIB)])
    commit_output(journal, a_session("ses-2"), [os.urandom(100 * KIB)])
    journal.delete_stream(SID)
    assert not (state_of("sb-1") / SEGMENTS_DIR / SID).exists()
    assert output_of(journal, "ses-2")
    journal.close()
    journals.remove("sb-1")
    assert not (state_of("sb-1") / SEGMENTS_DIR).exists()


def test_a_crash_between_deleting_a_stream_and_its_files_leaves_nothing_after_the_next_write(state_dir):
    journal = SqliteJournal(state_dir)
    commit_output(journal, a_session(), [os.urandom(100 * KIB)])
    journal.close()
    leftover = state_dir / SEGMENTS_DIR / "ses-gone"
    leftover.mkdir()
    (leftover / f"{3:016d}.seg").write_bytes(b"x" * 1000)
    (state_dir / SEGMENTS_DIR / "not-a-session.txt").write_text("a stray file stops nothing")
    reopened = SqliteJournal(state_dir)
    commit_output(reopened, a_session("ses-3"), [os.urandom(100 * KIB)])
    assert not leftover.exists()
    assert len(output_of(reopened)) == 1
    reopened.close()


def test_a_sealed_state_dir_is_complete_on_its_own(state_dir, tmp_path):
    journal = SqliteJournal(state_dir)
    session = a_session()
    chunks = [os.urandom(256 * KIB) for _ in range(3)]
    commit_output(journal, session, chunks)
    journal.seal()
    copy = tmp_path / "checkpoint"
    shutil.copytree(state_dir, copy)  # what the rootfs checkpoint takes
    resumed = SqliteJournal(copy)
    assert resumed.stored_copy(SID).version == session.version
    assert [data for _s, data in output_of(resumed)] == chunks
    more = os.urandom(256 * KIB)
    commit_output(resumed, session, [more])
    assert [data for _s, data in output_of(resumed)] == [*chunks, more]
    resumed.close()


def test_readers_racing_retention_get_each_event_s_own_bytes_or_nothing(state_dir, monkeypatch):
    monkeypatch.setattr(output_segments, "SEGMENT_BYTES", 512 * KIB)
    journal = SqliteJournal(state_dir)
    session = a_session()
    content = lambda seq: random.Random(seq).randbytes(128 * KIB)  # noqa: E731
    stop, seen, failures = threading.Event(), [], []

    def read() -> None:
        while not stop.is_set():
            try:
                for seq, data in output_of(journal)[:4]:  # the oldest rows: what retention removes
                    if data != content(seq):
                        failures.append(f"event {seq} read other bytes")
                    seen.append(seq)
            except Exception as exc:  # noqa: BLE001 - any error is the failure reported
                failures.append(repr(exc))

    readers = [threading.Thread(target=read) for _ in range(2)]
    for reader in readers:
        reader.start()
    deleted = 0
    try:
        for _round in range(60):
            for _ in range(4):
                session.record_output("stdout", content(session.version + 1), T0 + session.version)
            assert journal.commit(session.collect_events(), []).store_error is None
            through = session.version - 8
            while journal.trim_events(SID, deleted, through, LIFECYCLE_TOPICS, 3) == 3:
                pass
            deleted = through
    finally:
        stop.set()
        for reader in readers:
            reader.join()
    assert not failures, failures[:5]
    assert len(seen) > 20 and len(segment_files(state_dir)) <= 4
    journal.close()


def test_pages_of_events_kept_out_of_line_are_byte_identical_to_the_same_events_inline(tmp_path, monkeypatch):
    chunks = [os.urandom(256 * KIB), b"small\n", os.urandom(40 * KIB)]
    pages = []
    for threshold in (OUT_OF_LINE_MIN, 2**40):
        monkeypatch.setattr(output_segments, "OUT_OF_LINE_MIN", threshold)
        journal = SqliteJournal(tmp_path / str(threshold))
        commit_output(journal, a_session(), chunks)
        pages.append(read_public_json(journal, SID, 0, 10**9, 100))
        journal.close()
    out_of_line, inline = pages
    assert out_of_line == inline and len(out_of_line[0]) == 5
    assert any(is_ref(s) for s in stored_states(tmp_path / str(OUT_OF_LINE_MIN)).values())
    assert not any(is_ref(s) for s in stored_states(tmp_path / str(2**40)).values())


def test_a_page_whose_oldest_records_are_gone_still_tells_the_last_row_read(state_dir):
    journal = SqliteJournal(state_dir)
    commit_output(journal, a_session(), [os.urandom(256 * KIB) for _ in range(3)])
    for path in segment_files(state_dir):
        path.unlink()  # retention took them after the rows were read
    events, last = read_public_json(journal, SID, 2, 10**9, 100)
    assert events == [] and last == 5  # the view's re-check answers 410; a reader still moves on
    journal.close()

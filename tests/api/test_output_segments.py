"""Output bytes out of line, through a real server: a kill -9 in the middle of an
incompressible flood loses no committed byte and leaves no garbage that a later event would
reference; retention deletes whole segment files; a pause seals them with the journal.

Every byte is checked: the child cats a known random file in a loop, so the journal's output
must be a prefix of that endless stream (compared by sha256), with contiguous seqs.
"""
from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path

from session_supervisor.infra.segment_format import RECORD, REF, SEGMENTS_DIR, is_ref
from tests.conftest import make_http
from tests.helpers import (
    all_events, claim_sandbox, create_session, get_session, ok, output_bytes, spath, wait_event, wait_for,
    workspace_dir,
)
from tests.serverproc import ServerProcess

TOKEN = "segments-token"
MIB = 1024 * 1024
OUTPUT = "supervisor.Session.Output"


def sandbox_with_file(http, server: ServerProcess, block: bytes) -> tuple[str, Path, Path]:
    """A new sandbox, its state dir, and ``block`` written to a file in its workspace."""
    sb = claim_sandbox(http)
    source = workspace_dir(server.data_dir, sb) / "stream.bin"
    source.write_bytes(block)
    return sb, server.data_dir / "sandboxes" / sb / "state", source


def flood_spec(path: Path, **extra) -> dict:
    return {"command": ["sh", "-c", f"while :; do cat {path}; done"], "event_retention": {"max_bytes": 2**40},
            "lifecycle": {"runtime_recovery": "stop"}, **extra}


def stream_prefix(block: bytes, size: int) -> bytes:
    return (block * (size // len(block) + 1))[:size]


def references(state: Path, sid: str) -> list[tuple[int, int, int, int]]:
    """(seq, file, offset, length) of every stored output reference of ``sid``."""
    db = sqlite3.connect(f"file:{state / 'journal.sqlite'}?mode=ro", uri=True, timeout=10)
    try:
        rows = db.execute("SELECT originator_version, state FROM stored_events WHERE originator_id=? "
                          "AND topic=? ORDER BY originator_version", (sid, OUTPUT)).fetchall()
    finally:
        db.close()
    return [(seq, *REF.unpack_from(state, 1)) for seq, state in rows if is_ref(state)]


def unreferenced_bytes(state: Path, sid: str) -> int:
    """Bytes in the session's segment files beyond what its rows reference."""
    referenced = sum(RECORD.size + length for _seq, _file, _offset, length in references(state, sid))
    on_disk = sum(p.stat().st_size for p in (state / SEGMENTS_DIR / sid).glob("*.seg"))
    return on_disk - referenced


def by_attempt(journal: list[dict]) -> dict[str, bytes]:
    """Each attempt's output, in journal order."""
    out: dict[str, bytes] = {}
    for event in journal:
        if event["type"] == "output":
            out[event["attempt_id"]] = out.get(event["attempt_id"], b"") + output_bytes([event])
    return out


def assert_prefix_of_stream(http, sb, sid, block: bytes) -> list[dict]:
    journal = all_events(http, sb, sid)
    seqs = [e["seq"] for e in journal]
    assert seqs == list(range(1, len(seqs) + 1)), "the journal has a seq gap"
    for attempt, out in by_attempt(journal).items():
        assert hashlib.sha256(out).hexdigest() == hashlib.sha256(stream_prefix(block, len(out))).hexdigest(), \
            f"attempt {attempt}: {len(out)} bytes that are not the child's"
    return journal


def test_a_kill_during_an_incompressible_flood_loses_no_committed_byte_and_leaves_no_garbage(tmp_path):
    block = os.urandom(3 * MIB + 12345)  # not a multiple of any chunk size
    server = ServerProcess(tmp_path / "data", token=TOKEN, runtime="host").start()
    try:
        with make_http(server.url, TOKEN) as http:
            sb, state, source = sandbox_with_file(http, server, block)
            sid = create_session(http, sb, flood_spec(source))["id"]
        for kill in range(5):  # until a kill lands between a segment write and its commit
            with make_http(server.url, TOKEN) as http:
                if kill:
                    ok(http.post(spath(sb, sid, "/attempts"), json={}), 201)
                floor = get_session(http, sb, sid)["cursor"]["latest"]
                wait_for(lambda: get_session(http, sb, sid)["cursor"]["latest"] > floor + 40, timeout=30)
            server.kill()
            left = unreferenced_bytes(state, sid)
            server.start()
            if left > 0:
                break
        assert left > 0, "no kill landed between a segment write and its commit"
        with make_http(server.url, TOKEN) as http:
            wait_for(lambda: get_session(http, sb, sid)["phase"] != "running", timeout=15)
            assert_prefix_of_stream(http, sb, sid, block)
            # The next attempt's bytes go where the garbage was, and are fewer: they must read
            # back as its own, and nothing of the garbage may stay after them.
            short = flood_spec(source, command=["sh", "-c", f"head -c 100000 {source}; exec sleep 600"])
            ok(http.put(spath(sb, sid), json=short), 200)  # desired running: a new attempt
            wait_for(lambda: list(by_attempt(all_events(http, sb, sid)).values())[-1] == block[:100000], timeout=30)
            ok(http.put(spath(sb, sid, "/desired-state"), json={"state": "stopped"}), 200)
            wait_for(lambda: get_session(http, sb, sid)["phase"] != "running", timeout=15)
            journal = assert_prefix_of_stream(http, sb, sid, block)
            assert len({e["attempt_id"] for e in journal if e["type"] == "output"}) >= 2
            assert unreferenced_bytes(state, sid) == 0  # the crash's leftovers were cut
    finally:
        server.stop()


def test_retention_deletes_whole_segment_files_and_the_disk_stays_bounded(tmp_path):
    block = os.urandom(2 * MIB + 777)
    server = ServerProcess(tmp_path / "data", token=TOKEN, runtime="host").start()
    try:
        with make_http(server.url, TOKEN) as http:
            sb, state, source = sandbox_with_file(http, server, block)
            spec = {"command": ["sh", "-c", f"for i in $(seq 60); do cat {source}; done"],
                    "event_retention": {"max_bytes": 8 * MIB}}
            sid = create_session(http, sb, spec)["id"]
            wait_for(lambda: any(e["type"] == "attempt.exited" for e in ok(
                http.get(spath(sb, sid, "/history")), 200)["events"]), timeout=60)
            segments = state / SEGMENTS_DIR / sid
            # 120 MiB through an 8 MiB window: the files left hold the window plus one file.
            wait_for(lambda: sum(p.stat().st_size for p in segments.glob("*.seg")) < 8 * MIB + 16 * MIB + MIB,
                     timeout=30, describe=lambda: sorted((p.name, p.stat().st_size) for p in segments.glob("*")))
            files = sorted(p.name for p in segments.glob("*.seg"))
            assert 1 <= len(files) <= 3, files
            cursor = get_session(http, sb, sid)["cursor"]
            assert cursor["earliest"] > 100
            page = ok(http.get(spath(sb, sid, "/events"), params={"after": cursor["earliest"] - 1}), 200)
            out = output_bytes(page["events"])
            assert len(out) > MIB and out in stream_prefix(block, 61 * len(block))
    finally:
        server.stop()


def test_a_paused_sandbox_keeps_its_segments_and_resumes_reading_and_writing_them(tmp_path):
    block = os.urandom(MIB + 4321)
    server = ServerProcess(tmp_path / "data", token=TOKEN, runtime="host").start()
    try:
        with make_http(server.url, TOKEN) as http:
            sb, state, source = sandbox_with_file(http, server, block)
            spec = {"command": ["sh", "-c", f"cat {source} {source} {source}; exec sleep 600"]}
            sid = create_session(http, sb, spec)["id"]
            wait_for(lambda: len(output_bytes(all_events(http, sb, sid))) == 3 * len(block), timeout=30)
            ok(http.post(f"/api/v1/sandboxes/{sb}/pause"), 200)
            assert not (state / "journal.sqlite-wal").exists() or (state / "journal.sqlite-wal").stat().st_size == 0
            assert references(state, sid) and unreferenced_bytes(state, sid) == 0
            ok(http.post(f"/api/v1/sandboxes/{sb}/resume"), 200)
            # The host runtime replaces the attempt on resume: the new one cats the file again.
            wait_for(lambda: len(output_bytes(all_events(http, sb, sid))) == 6 * len(block), timeout=30)
            assert list(by_attempt(all_events(http, sb, sid)).values()) == [block * 3, block * 3]
            assert unreferenced_bytes(state, sid) == 0
    finally:
        server.stop()

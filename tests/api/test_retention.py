"""Retention (contract §6.12): a bounded window, an explicit 410 below it, audit views
that keep the whole attempt history, and seqs that are never reused after trimming."""
from __future__ import annotations

import json
import sqlite3

import pytest

from tests.conftest import make_http
from tests.helpers import (
    SSEReader,
    claim_sandbox,
    create_session,
    err,
    get_session,
    ok,
    spath,
    wait_for,
    write_input,
)
from tests.serverproc import ServerProcess

KIB = 1024
ATTEMPT_BYTES = 4 * 1024 * KIB // 3 + 1  # three attempts print 4 MiB


def logical_size(event: dict) -> int:
    return len(json.dumps(event, separators=(",", ":")).encode()) + 1


def wait_attempt_finished(http, sb, sid, number: int, timeout=30) -> dict:
    """Until the journal holds the exit of attempt ``number`` (the history reads only
    committed events; the Session resource may run ahead of the journal)."""
    def finished():
        events = page(http, sb, sid, 0, "/history")["events"]
        exits = [e for e in events if e["type"] == "attempt.exited"]
        return exits[-1] if len(exits) == number else None
    return wait_for(finished, timeout=timeout, describe=lambda: get_session(http, sb, sid))


def page(http, sb, sid, after, tail="/events", limit=10000) -> dict:
    return ok(http.get(spath(sb, sid, tail), params={"after": after, "limit": limit}), 200)


def test_a_256_kib_budget_over_three_attempts_keeps_a_256_kib_window_and_the_whole_history(http, sandbox_id):
    spec = {"command": ["head", "-c", str(ATTEMPT_BYTES), "/dev/zero"],
            "event_retention": {"max_bytes": 256 * KIB}}
    sid = create_session(http, sandbox_id, spec)["id"]
    wait_attempt_finished(http, sandbox_id, sid, 1)
    for number in (2, 3):
        ok(http.post(spath(sandbox_id, sid, "/attempts"), json={}), 201)
        wait_attempt_finished(http, sandbox_id, sid, number)

    error = err(http.get(spath(sandbox_id, sid, "/events"), params={"after": 0}), 410, "event_cursor_expired")
    earliest, latest = error["details"]["earliest"], error["details"]["latest"]
    assert 1 < earliest <= latest, error
    window = page(http, sandbox_id, sid, earliest - 1)
    assert window["cursor"] == {"earliest": earliest, "latest": latest}
    assert [e["seq"] for e in window["events"]] == list(range(earliest, latest + 1))
    retained = sum(logical_size(e) for e in window["events"])
    assert 192 * KIB <= retained <= 256 * KIB, retained
    err(http.get(spath(sandbox_id, sid, "/events"), params={"after": earliest - 2}), 410, "event_cursor_expired")

    attempts = ok(http.get(spath(sandbox_id, sid, "/attempts")), 200)["attempts"]
    assert [a["number"] for a in attempts] == [1, 2, 3]
    for attempt in attempts:
        assert attempt["exit_code"] == 0 and attempt["reason"] == "stopped", attempt
        assert {"id", "runtime_generation", "start_reason", "pid", "started_at", "finished_at"} <= set(attempt)
    assert [a["start_reason"] for a in attempts] == ["created", "attempt_created", "attempt_created"]

    history = page(http, sandbox_id, sid, 0, "/history")
    events = history["events"]
    assert events[0]["seq"] == 1 and events[0]["type"] == "session.created"
    assert all(e["type"].startswith(("session.", "attempt.")) for e in events)
    exits = [e for e in events if e["type"] == "attempt.exited"]
    assert [e["attempt_id"] for e in exits] == [a["id"] for a in attempts]
    assert history["cursor"] == {"earliest": 1, "latest": latest}


def test_the_history_pages_by_after_and_rejects_a_cursor_beyond_latest(http, sandbox_id):
    sid = create_session(http, sandbox_id, {"command": ["true"]})["id"]
    wait_attempt_finished(http, sandbox_id, sid, 1)
    events = page(http, sandbox_id, sid, 0, "/history")["events"]
    first = page(http, sandbox_id, sid, 0, "/history", limit=2)["events"]
    rest = page(http, sandbox_id, sid, first[-1]["seq"], "/history")["events"]
    assert first + rest == events
    latest = get_session(http, sandbox_id, sid)["cursor"]["latest"]
    err(http.get(spath(sandbox_id, sid, "/history"), params={"after": latest + 1}), 400, "invalid_request")
    err(http.get(spath(sandbox_id, sid, "/history"), params={"limit": 0}), 400, "invalid_request")
    err(http.get(spath(sandbox_id, "ses-00000000-000", "/history")), 404, "session_not_found")
    err(http.get(spath(sandbox_id, "ses-00000000-000", "/attempts")), 404, "session_not_found")


def test_a_cursor_at_earliest_minus_one_works_when_everything_was_trimmed(http, sandbox_id):
    spec = {"command": ["sh", "-c", "echo hello"], "event_retention": {"max_bytes": 1}}
    sid = create_session(http, sandbox_id, spec)["id"]
    wait_attempt_finished(http, sandbox_id, sid, 1)
    cursor = wait_for(lambda: (c := get_session(http, sandbox_id, sid)["cursor"])["earliest"] > c["latest"] and c)
    assert cursor["earliest"] == cursor["latest"] + 1
    assert page(http, sandbox_id, sid, cursor["latest"])["events"] == []
    err(http.get(spath(sandbox_id, sid, "/events"), params={"after": cursor["latest"] - 1}), 410)


# ---- no seq is ever reused, even when trimming deleted the newest events ----------------------
def stored_versions(server: ServerProcess, sb: str, sid: str) -> list[int]:
    path = server.data_dir / "sandboxes" / sb / "state" / "journal.sqlite"
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    try:
        rows = connection.execute("SELECT originator_version FROM stored_events WHERE originator_id=? "
                                  "ORDER BY originator_version", (sid,)).fetchall()
    finally:
        connection.close()
    return [row[0] for row in rows]


def echo_and_trim(http, server, sb, sid, tag: str) -> int:
    """Echo through cat (every event trimmed at once), then wait until the newest rows are gone."""
    latest = get_session(http, sb, sid)["cursor"]["latest"]
    with SSEReader(server.url, spath(sb, sid, "/events/stream"), params={"after": latest}) as sse:
        write_input(http, sb, sid, f"{tag}-1", data=f"{tag}\n")
        sse.read_until(lambda e: e["type"] == "output")
    # A newer row of another session: SQLite's rowid guard never deletes the newest row.
    ok(http.post(spath(sb), json={"command": ["true"]}), 201)
    latest = get_session(http, sb, sid)["cursor"]["latest"]
    wait_for(lambda: max(stored_versions(server, sb, sid)) < latest, timeout=20,
             describe=lambda: (latest, stored_versions(server, sb, sid)))
    return latest


@pytest.mark.parametrize("crash", [True, False], ids=["kill-9", "graceful"])
def test_no_seq_is_reused_after_trimming_the_newest_events_and_restarting(tmp_path, crash):
    server = ServerProcess(tmp_path / "data", token="test-token", runtime="host").start()
    try:
        with make_http(server.url) as http:
            sb = claim_sandbox(http)
            sid = create_session(http, sb, {"command": ["cat"], "event_retention": {"max_bytes": 1}})["id"]
            latest = echo_and_trim(http, server, sb, sid, "one")
            before = page(http, sb, sid, 0, "/history")["events"]
        server.kill() if crash else server.stop()
        server.start()
        with make_http(server.url) as http:
            session = get_session(http, sb, sid)
            assert session["cursor"]["latest"] > latest  # recovery appended after the old latest
            history = page(http, sb, sid, 0, "/history")["events"]
            seqs = [e["seq"] for e in history]
            assert seqs == sorted(set(seqs)), seqs
            assert history[:len(before)] == before  # what was there is still there, unchanged
            assert all(e["seq"] > latest for e in history[len(before):]), history
            replaced = [e for e in history if e.get("reason") == "runtime_replaced"]
            assert len(replaced) == 1, history
            wait_for(lambda: get_session(http, sb, sid)["phase"] == "running")
            again = echo_and_trim(http, server, sb, sid, "two")
            assert again > latest + 1
    finally:
        server.stop()


def store_size(server: ServerProcess, sb: str) -> tuple[int, int]:
    """(bytes of database pages, counting pages still in the WAL; bytes of the WAL file)."""
    path = server.data_dir / "sandboxes" / sb / "state" / "journal.sqlite"
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    try:
        pages = connection.execute("PRAGMA page_count").fetchone()[0]
        page_size = connection.execute("PRAGMA page_size").fetchone()[0]
    finally:
        connection.close()
    return pages * page_size, path.with_name(path.name + "-wal").stat().st_size


def test_disk_usage_stays_bounded_while_a_small_budget_trims_incompressible_output(tmp_path):
    server = ServerProcess(tmp_path / "data", token="test-token", runtime="host").start()
    try:
        with make_http(server.url) as http:
            sb = claim_sandbox(http)
            spec = {"command": ["head", "-c", str(96 * 1024 * KIB), "/dev/urandom"],
                    "event_retention": {"max_bytes": 1024 * KIB}}
            sid = create_session(http, sb, spec)["id"]
            sizes = []
            for number in (1, 2, 3):
                if number > 1:
                    ok(http.post(spath(sb, sid, "/attempts"), json={}), 201)
                wait_attempt_finished(http, sb, sid, number, timeout=120)
                # ~1,500 output events per attempt: the purge deletes the old ones and hands
                # the free pages beyond a 32 MiB reserve back to the filesystem.
                wait_for(lambda: len(stored_versions(server, sb, sid)) < 200, timeout=30)
                wait_for(lambda: store_size(server, sb)[0] < 48 * 1024 * KIB, timeout=30,
                         describe=lambda: store_size(server, sb))
                sizes.append(store_size(server, sb))
            # 288 MiB went through a 1 MiB window: the database is back to the window plus the
            # reserve after each burst, and the WAL is as large as the largest commit. Neither
            # grows with the volume.
            assert max(wal for _db, wal in sizes) < 160 * 1024 * KIB, sizes
    finally:
        server.stop()

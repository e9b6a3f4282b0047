"""Replay of a 64 MiB journal (logical bytes) through paged reads and through SSE.

Two journals: small output events (where events/s is the measure) and 32 KiB events
(the reference benchmark's size, where MB/s is). Baselines in the same run: a plain
``sqlite3`` scan of the same rows (the storage floor) and the server's own read path
called in-process (decode + render, no HTTP). MB/s counts response bytes.
"""
from __future__ import annotations

import socket
import sqlite3
import time
from pathlib import Path

import orjson

from session_supervisor.api.journal_wire import json_rows
from session_supervisor.domain.sandbox_store import SandboxStore
from session_supervisor.infra.event_store import SqliteJournal
from tests.helpers import TOKEN, spath

from .common import MIB, BenchServer, Report
from .journals import build, store_path

PAGE = 10000


def sqlite_floor(path: Path, session_id: str) -> tuple[float, int]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    started = time.perf_counter()
    rows = db.execute("SELECT originator_version, topic, state FROM stored_events WHERE originator_id=? "
                      "ORDER BY originator_version", (session_id,)).fetchall()
    elapsed = time.perf_counter() - started
    db.close()
    return elapsed, len(rows)


def in_process(data_dir: Path, sandbox_id: str, session_id: str, latest: int) -> tuple[float, int]:
    app = SandboxStore(SqliteJournal(data_dir / "sandboxes" / sandbox_id / "state"))
    started = time.perf_counter()
    after, count = 0, 0
    while after < latest:  # what a page costs the server: its events as JSON, joined
        events, last = json_rows(session_id, app.read_raw(session_id, after, latest, PAGE))
        if not last:
            break
        b",".join(json for _seq, _kind, json in events)
        count += len(events)
        after = last
    elapsed = time.perf_counter() - started
    app.close()
    return elapsed, count


def paged(server: BenchServer, sb: str, sid: str) -> tuple[float, int, int, float]:
    """Seconds, events, response bytes, and the seconds of that the client spent parsing."""
    started = time.perf_counter()
    after, count, size, parsing = 0, 0, 0, 0.0
    while True:
        resp = server.http.get(spath(sb, sid, "/events"), params={"after": after, "limit": PAGE})
        parse_started = time.perf_counter()
        page = orjson.loads(resp.content)["data"]
        parsing += time.perf_counter() - parse_started
        events = page["events"]
        count += len(events)
        size += len(resp.content)
        if not events or events[-1]["seq"] >= page["cursor"]["latest"]:
            return time.perf_counter() - started, count, size, parsing
        after = events[-1]["seq"]


def sse(server: BenchServer, sb: str, sid: str, latest: int) -> tuple[float, int]:
    host, port = server.url.removeprefix("http://").split(":")
    marker = b"id: %d\n" % latest
    started = time.perf_counter()
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(f"GET {spath(sb, sid, '/events/stream')}?after=0 HTTP/1.1\r\nHost: {host}\r\n"
                     f"Authorization: Bearer {TOKEN}\r\n\r\n".encode())
        tail, size = b"", 0
        while marker not in tail:
            chunk = sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("SSE stream ended before the last event")
            size += len(chunk)
            tail = tail[-64:] + chunk
    return time.perf_counter() - started, size


def replay(work: Path, journal_bytes: int, runs: int) -> Report:
    report = Report(f"Replay of a {journal_bytes / MIB:.0f} MiB journal")
    for label, payload in (("small events", 256), ("32 KiB events", 32 * 1024)):
        data_dir = work / label.replace(" ", "-")
        logical = payload * 4 // 3 + 200
        events = max(10, journal_bytes // logical)
        sandbox_id, (sid,) = build(data_dir, 1, events, payload, max_bytes=4 * journal_bytes)
        latest = events + 5
        floor = report.figure(f"{label}: sqlite3 scan (floor)", "events/s")
        direct = report.figure(f"{label}: read path in-process", "events/s", baseline=floor.name)
        page_rate = report.figure(f"{label}: paged GET /events", "events/s", baseline=(floor.name,))
        page_mb = report.figure(f"{label}: paged GET /events MB/s", "MB/s")
        parse_share = report.figure(f"{label}: paged, the client's JSON parse share", "%",
                                    higher_is_better=False)
        sse_rate = report.figure(f"{label}: SSE after=0", "events/s", baseline=(floor.name,))
        sse_mb = report.figure(f"{label}: SSE MB/s", "MB/s")
        for _ in range(runs):
            elapsed, rows = sqlite_floor(store_path(data_dir, sandbox_id), sid)
            floor.runs.append(rows / elapsed)
            elapsed, count = in_process(data_dir, sandbox_id, sid, latest)
            direct.runs.append(count / elapsed)
        with BenchServer(data_dir) as server:
            for _ in range(runs):
                elapsed, count, size, parsing = paged(server, sandbox_id, sid)
                assert count == latest, (count, latest)
                page_rate.runs.append(count / elapsed)
                parse_share.runs.append(100 * parsing / elapsed)
                page_mb.runs.append(size / elapsed / 1e6)
                elapsed, size = sse(server, sandbox_id, sid, latest)
                sse_rate.runs.append(latest / elapsed)
                sse_mb.runs.append(size / elapsed / 1e6)
        report.notes.append(f"{label}: {latest:,} events; the client (same machine, 2 vCPUs) "
                            "parses every page; SSE counts bytes on the wire")
    return report

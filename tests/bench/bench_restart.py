"""Server restart cost with many sessions whose journals are short or long.

The server is started over the same store again and again and timed until /healthz
answers (the store is loaded and every session recovered by then), then killed with
SIGKILL, so every start is a crash restart over an unchanged store. Restart cost must
not grow with journal length: a session is rebuilt from its latest snapshot plus the
tail after it. A store without snapshots shows what a full replay would cost instead.
"""
from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from tests.helpers import spath

from .common import BenchServer, Report, rss_kib
from .journals import build, store_path

PAYLOAD = 200


def restart_once(data_dir: Path, sandbox_id: str, sessions: int) -> tuple[float, int]:
    server = BenchServer(data_dir)
    try:
        elapsed = server.start()
        listed = server.http.get(spath(sandbox_id)).json()["data"]["sessions"]
        assert len(listed) == sessions, len(listed)
        rss = rss_kib(server.pid)
    finally:
        if server.http is not None:
            server.http.close()
        server.proc.kill()  # a crash: no shutdown snapshots, the store stays as built
    return elapsed, rss


def without_snapshots(source: Path, target: Path, sandbox_id: str) -> None:
    shutil.copytree(source, target)
    db = sqlite3.connect(store_path(target, sandbox_id))
    db.execute("DELETE FROM stored_snapshots")
    db.commit()
    db.close()


def restart_cost(work: Path, sessions: int, short: int, long: int, runs: int, full_replay: bool) -> Report:
    report = Report(f"Server restart with {sessions:,} sessions (kill -9, then start until healthy)")
    stores = {}
    for label, events in ((f"{short} events/session", short), (f"{long} events/session", long)):
        data_dir = work / f"journals-{events}"
        stores[label] = (data_dir, build(data_dir, sessions, events, PAYLOAD)[0])
    if full_replay:
        data_dir, sandbox_id = stores[f"{long} events/session"]
        bare = work / f"journals-{long}-no-snapshots"
        without_snapshots(data_dir, bare, sandbox_id)
        stores[f"{long} events/session, no snapshots"] = (bare, sandbox_id)
    base_name = f"start, {short} events/session"
    empty = report.figure("start, empty data dir (floor)", "s", higher_is_better=False)
    for _ in range(runs):
        with BenchServer(work / "empty") as server:
            empty.runs.append(server.start_seconds)
        for label, (data_dir, sandbox_id) in stores.items():
            elapsed, rss = restart_once(data_dir, sandbox_id, sessions)
            report.figure(f"start, {label}", "s", baseline=() if label.startswith(str(short) + " ")
                          else base_name, higher_is_better=False).runs.append(elapsed)
            report.figure(f"RSS after start, {label}", "MiB", higher_is_better=False).runs.append(rss / 1024)
    report.notes.append(f"journals built offline with the server's own model and snapshot policy "
                        f"({PAYLOAD}-byte output events); the restart cost should be flat in length")
    return report

"""More than one machine: the journal in PostgreSQL against the embedded SQLite, side by side.

* Pipe ingest (zeros) and the input-to-echo round trip through ``cat`` on one node with
  ``--database-url`` (a private PostgreSQL cluster on a unix socket, fsync and
  ``synchronous_commit`` on) against the same node on SQLite (``synchronous=FULL``); runs
  interleaved, ratios PostgreSQL / SQLite.
* Resume on the other node: a sandbox whose session has a long journal (``--long`` events,
  written through the server as many small commits) is paused on node A and resumed through
  node B (workspace restored from the shared checkpoint dir, aggregates from snapshot plus
  tail, generation + 1); against a sandbox with a short journal, resumed the same way.
"""
from __future__ import annotations

import time
from pathlib import Path

from tests.helpers import b64, ok, spath
from tests.pgcluster import PgCluster, find_bin_dir
from tests.serverproc import free_port

from .bench_echo import echo_round_trips
from .bench_ingest import ours
from .common import MB, BenchServer, Report, percentile


def node(work: Path, name: str, database_url: str = "", checkpoints: Path | None = None) -> BenchServer:
    server = BenchServer(work / name)
    if database_url:
        port = free_port()
        server.proc.port = port
        server.proc.extra_args = ["--database-url", database_url, "--checkpoint-dir", str(checkpoints),
                                  "--node-id", name, "--advertise-url", f"http://127.0.0.1:{port}"]
    return server


def cluster_bench(work: Path, pipe_bytes: int, runs: int, echo_count: int, echo_warmup: int,
                  long_events: int, short_events: int) -> Report:
    report = Report("More than one machine: PostgreSQL against SQLite, and resume on another node")
    bin_dir = find_bin_dir()
    if bin_dir is None:
        report.notes.append("skipped: no PostgreSQL server binaries (apt-get install postgresql)")
        return report
    work.mkdir(parents=True, exist_ok=True)
    checkpoints = work / "checkpoints"
    checkpoints.mkdir()
    with PgCluster(bin_dir, durable=True) as pg:
        pg.sql("CREATE DATABASE bench")
        url = pg.url("bench")
        _ingest_and_echo(report, work, url, checkpoints, pipe_bytes, runs, echo_count, echo_warmup)
        _resume_elsewhere(report, work, url, checkpoints, long_events, short_events, runs)
    report.notes.append("PostgreSQL: a private cluster on a unix socket on the same disk, fsync and "
                        "synchronous_commit on; SQLite: synchronous=FULL, as shipped")
    return report


def _ingest_and_echo(report, work, url, checkpoints, size, runs, count, warmup) -> None:
    pg_pipe = report.figure("pipe ingest, PostgreSQL", "MB/s", baseline="pipe ingest, SQLite")
    lite_pipe = report.figure("pipe ingest, SQLite", "MB/s")
    pg_p50 = report.figure("echo p50, PostgreSQL", "ms", baseline="echo p50, SQLite", higher_is_better=False)
    lite_p50 = report.figure("echo p50, SQLite", "ms", higher_is_better=False)
    pg_p99 = report.figure("echo p99, PostgreSQL", "ms", baseline="echo p99, SQLite", higher_is_better=False)
    lite_p99 = report.figure("echo p99, SQLite", "ms", higher_is_better=False)
    with node(work, "pg", url, checkpoints) as on_pg, node(work, "sqlite") as on_sqlite:
        spec = {"command": ["head", "-c", str(size), "/dev/zero"]}
        for server, figure in [(on_pg, pg_pipe), (on_sqlite, lite_pipe)] * runs:  # interleaved
            sb = server.sandbox()
            elapsed, _cpu = ours(server, sb, spec)
            figure.runs.append(size / MB / elapsed)
        for server, p50, p99 in [(on_pg, pg_p50, pg_p99), (on_sqlite, lite_p50, lite_p99)] * runs:
            samples, _http, _accepted = echo_round_trips(server, server.sandbox(), count, warmup)
            p50.runs.append(percentile(samples, 50) * 1000)
            p99.runs.append(percentile(samples, 99) * 1000)


def _journal_of(server: BenchServer, sb: str, events: int) -> str:
    """A session with ``events`` input and output events, written as small commits."""
    sid = server.create(sb, {"command": ["cat"]})
    for n in range(events // 2):
        ok(server.http.post(spath(sb, sid, "/inputs"), json={"input_id": f"i{n}", "data_base64": b64(b"x\n")}), 202)
    return sid


def _resume_elsewhere(report, work, url, checkpoints, long_events, short_events, runs) -> None:
    long_resume = report.figure(f"resume on the other node, {long_events:,} events", "ms",
                                baseline=f"resume on the other node, {short_events} events", higher_is_better=False)
    short_resume = report.figure(f"resume on the other node, {short_events} events", "ms", higher_is_better=False)
    with node(work, "node-a", url, checkpoints) as a, node(work, "node-b", url, checkpoints) as b:
        sandboxes = []
        for events, figure in ((long_events, long_resume), (short_events, short_resume)):
            sb = a.sandbox()
            _journal_of(a, sb, events)
            sandboxes.append((sb, figure))
        for round_ in range(runs):
            here, there = (a, b) if round_ % 2 == 0 else (b, a)
            for sb, figure in sandboxes:
                ok(here.http.post(f"/api/v1/sandboxes/{sb}/pause"), 200)
                started = time.perf_counter()
                ok(there.http.post(f"/api/v1/sandboxes/{sb}/resume"), 200)
                figure.runs.append((time.perf_counter() - started) * 1000)

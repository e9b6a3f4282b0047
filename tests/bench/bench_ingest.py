"""Pipe ingest: a child's output into the durable journal, against the floors and supervisord.

Two inputs: ``head -c N /dev/zero`` (the child of users-and-baselines.md §4.2/§4.3) and
``cat`` of a file of random bytes (incompressible), each into (a) ``cat > /dev/null`` (the
raw pipe floor), (b) ``cat > file`` plus one fsync (the durable floor), (c) supervisord
4.3's log, timed by the log's size, (d) a session of ours, from POST to the committed
``attempt.exited`` (which lands after every output event), with the default 64 MiB
retention trimming as it goes. The incompressible input runs (c) and (d) a second time
with one CPU kept busy by a spinning process: on 2 CPUs that is what a shared machine
looks like. Every variant runs once per round, rounds interleaved, so noise spreads over
all of them. The PTY benchmark is in ``bench_pty``.
"""
from __future__ import annotations

import os
import shlex
import subprocess
import time
from pathlib import Path

from .common import MB, MIB, BenchServer, Report, busy_cpu, cpu_seconds
from .supervisord import Supervisord, ensure_installed


def shell_floor(command: str) -> float:
    started = time.perf_counter()
    subprocess.run(["sh", "-c", f"{command} | cat > /dev/null"], check=True)
    return time.perf_counter() - started


def durable_floor(command: str, target: Path) -> float:
    """``child | cat > file`` then one fsync of the file: the floor for capture that
    survives power loss (ours commits with synchronous=FULL as it goes)."""
    started = time.perf_counter()
    with open(target, "wb") as out:
        subprocess.run(["sh", "-c", f"{command} | cat"], stdout=out, check=True)
        os.fsync(out.fileno())
    elapsed = time.perf_counter() - started
    target.unlink()
    return elapsed


def ours(server: BenchServer, sb: str, spec: dict) -> tuple[float, float]:
    """Seconds from POST to the committed exit, and the server's CPU seconds meanwhile."""
    cpu = cpu_seconds(server.pid)
    started = time.perf_counter()
    sid = server.create(sb, spec)
    server.wait_exited(sb, sid)
    elapsed = time.perf_counter() - started
    return elapsed, cpu_seconds(server.pid) - cpu


def pipe_ingest(work: Path, size: int, random_size: int, runs: int, install: bool) -> Report:
    report = Report(f"Pipe ingest of {size / MIB:.0f} MiB of zeros and {random_size / MIB:.0f} MiB "
                    "of random bytes into the durable journal")
    work.mkdir(parents=True, exist_ok=True)
    path, why = ensure_installed(install)
    inputs = [("zeros", f"head -c {size} /dev/zero", size, False), random_input(work, random_size)]
    with BenchServer(work / "ours") as server:
        sb = server.sandbox()
        for label, child, total, busy_too in inputs:
            input_rows(report, work, server, sb, label, child, total, runs, path, why, busy_too)
    report.notes.append("zeros compress to almost nothing: the journal writes little, the "
                        "incompressible rows show the cost of storing every byte")
    report.notes.append("supervisord is timed by its log file's size (no XML-RPC during a run); "
                        "'cat > file + fsync' is the floor for durable capture")
    return report


def random_input(work: Path, size: int) -> tuple[str, str, int, bool]:
    """``cat`` of one file of random bytes: nothing in it compresses."""
    blob = work / "random.bin"
    with open(blob, "wb") as f:
        for _ in range(0, size, 16 * MIB):
            f.write(os.urandom(min(16 * MIB, size - f.tell())))
    return "incompressible", f"cat {blob}", size, True


def input_rows(report: Report, work: Path, server: BenchServer, sb: str, label: str, child: str,
               total: int, runs: int, path: Path | None, why: str, busy_too: bool) -> None:
    """One input, every variant interleaved round-robin: floors, supervisord, ours (and when
    ``busy_too``, supervisord and ours again with one CPU busy)."""
    floor = report.figure(f"{label}: raw pipe floor, | cat > /dev/null", "MB/s")
    durable = report.figure(f"{label}: cat > file + fsync", "MB/s", baseline=floor.name)
    sup = report.figure(f"{label}: supervisord 4.3 to its log", "MB/s", baseline=(floor.name, durable.name))
    mine = report.figure(f"{label}: ours, session journal", "MB/s",
                         baseline=(sup.name, durable.name, floor.name))
    cpu = report.figure(f"{label}: ours, server CPU per GB", "s", higher_is_better=False)
    sup_cpu = report.figure(f"{label}: supervisord's own CPU per GB", "s", higher_is_better=False)
    if supervisor_cpu_note := (why if path is None else ""):
        sup_cpu.note = supervisor_cpu_note
    sup_busy = report.figure(f"{label}, one CPU busy: supervisord 4.3", "MB/s") if busy_too else None
    mine_busy = report.figure(f"{label}, one CPU busy: ours", "MB/s",
                              baseline=(sup_busy.name, sup.name)) if busy_too else None
    supervisor = Supervisord(path, work / f"supervisord-{label}", f"sh -c {shlex.quote(child)}") if path is not None else None
    if supervisor is None:
        sup.note = why
        if sup_busy is not None:
            sup_busy.note = why
    try:
        for _ in range(runs):
            floor.runs.append(total / shell_floor(child) / MB)
            durable.runs.append(total / durable_floor(child, work / "durable.out") / MB)
            if supervisor is not None:
                used = cpu_seconds(supervisor.pid)
                sup.runs.append(total / supervisor.run(total) / MB)
                sup_cpu.runs.append((cpu_seconds(supervisor.pid) - used) / (total / 1e9))
            elapsed, used = ours(server, sb, {"command": ["sh", "-c", child]})
            mine.runs.append(total / elapsed / MB)
            cpu.runs.append(used / (total / 1e9))
            if busy_too:
                with busy_cpu():
                    if supervisor is not None:
                        sup_busy.runs.append(total / supervisor.run(total) / MB)
                    mine_busy.runs.append(total / ours(server, sb, {"command": ["sh", "-c", child]})[0] / MB)
    finally:
        if supervisor is not None:
            supervisor.close()

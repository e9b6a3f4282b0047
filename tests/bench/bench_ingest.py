"""Ingest: a child's output into the durable journal, against the floor and supervisord.

Pipes: ``head -c N /dev/zero`` (the child of users-and-baselines.md §4.2/§4.3), and in
full mode N incompressible bytes, each into (a) ``cat > /dev/null`` (the raw pipe floor),
(b) ``cat > file`` plus one fsync (the durable floor), (c) supervisord 4.3's log, timed
by the log's size, (d) a session of ours, from POST to the committed ``attempt.exited``
(which lands after every output event), with the default 64 MiB retention trimming as
it goes. PTY: ``cat`` of a base64 text file (§4.4) read by a
plain Python reader on a PTY master, against a ``pty`` session of ours. Runs are
interleaved round-robin so noise spreads over every variant.
"""
from __future__ import annotations

import base64
import os
import pty
import shlex
import subprocess
import time
from pathlib import Path

from .common import MB, MIB, BenchServer, Report, cpu_seconds
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


def pipe_ingest(work: Path, size: int, runs: int, install: bool, incompressible: bool) -> Report:
    report = Report(f"Pipe ingest of {size / MIB:.0f} MiB into the durable journal")
    work.mkdir(parents=True, exist_ok=True)
    path, why = ensure_installed(install)
    inputs = [("zeros", f"head -c {size} /dev/zero", size)]
    if incompressible:
        inputs.append(random_input(work, size))
    with BenchServer(work / "ours") as server:
        sb = server.sandbox()
        for label, child, total in inputs:
            input_rows(report, work, server, sb, label, child, total, runs, path, why)
    report.notes.append("zeros compress to almost nothing: the journal writes little, the "
                        "incompressible rows show the cost of storing every byte")
    report.notes.append("supervisord is timed by its log file's size (no XML-RPC during a run); "
                        "'cat > file + fsync' is the floor for durable capture")
    return report


def random_input(work: Path, size: int) -> tuple[str, str, int]:
    blob = work / "random.bin"
    block = min(64 * MIB, size)
    with open(blob, "wb") as f:
        f.write(os.urandom(block))
    repeat = max(1, size // block)
    return "incompressible", f"for i in $(seq {repeat}); do cat {blob}; done", repeat * block


def input_rows(report: Report, work: Path, server: BenchServer, sb: str, label: str, child: str,
               total: int, runs: int, path: Path | None, why: str) -> None:
    """One input, every variant interleaved round-robin: floors, supervisord, ours."""
    floor = report.figure(f"{label}: raw pipe floor, | cat > /dev/null", "MB/s")
    durable = report.figure(f"{label}: cat > file + fsync", "MB/s", baseline=floor.name)
    sup = report.figure(f"{label}: supervisord 4.3 to its log", "MB/s", baseline=(floor.name, durable.name))
    mine = report.figure(f"{label}: ours, session journal", "MB/s",
                         baseline=(sup.name, durable.name, floor.name))
    cpu = report.figure(f"{label}: ours, server CPU per GB", "s", higher_is_better=False)
    supervisor = Supervisord(path, work / f"supervisord-{label}", f"sh -c {shlex.quote(child)}") if path is not None else None
    if supervisor is None:
        sup.note = why
    try:
        for _ in range(runs):
            floor.runs.append(total / shell_floor(child) / MB)
            durable.runs.append(total / durable_floor(child, work / "durable.out") / MB)
            if supervisor is not None:
                sup.runs.append(total / supervisor.run(total) / MB)
            elapsed, used = ours(server, sb, {"command": ["sh", "-c", child]})
            mine.runs.append(total / elapsed / MB)
            cpu.runs.append(used / (total / 1e9))
    finally:
        if supervisor is not None:
            supervisor.close()


# ---- PTY ----------------------------------------------------------------------------------
def text_file(path: Path, size: int) -> int:
    """Base64 text in 77-byte lines (76 + newline), as users-and-baselines.md §4.4."""
    raw = os.urandom(size * 3 // 4)
    text = base64.encodebytes(raw)  # 76-character lines
    path.write_bytes(text[:size])
    return min(size, len(text))


def raw_pty_reader(path: Path) -> float:
    """A Python reader on a PTY master (cooked mode, ONLCR on), the child being ``cat``."""
    master, slave = pty.openpty()
    started = time.perf_counter()
    child = subprocess.Popen(["cat", str(path)], stdin=slave, stdout=slave, stderr=slave,
                             start_new_session=True)
    os.close(slave)
    try:
        while True:
            try:
                if not os.read(master, 65536):
                    break
            except OSError:  # EIO: the child side is closed
                break
    finally:
        os.close(master)
        child.wait()
    return time.perf_counter() - started


def pty_ingest(work: Path, size: int, runs: int) -> Report:
    report = Report(f"PTY ingest of {size / MIB:.0f} MiB of base64 text (cat)")
    work.mkdir(parents=True, exist_ok=True)
    path = work / "text.b64"
    size = text_file(path, size)
    floor = report.figure("raw PTY reader (Python os.read)", "MB/s")
    mine = report.figure("ours: pty session journal", "MB/s", baseline=floor.name)
    spec = {"command": ["cat", str(path)], "io": {"mode": "pty"}}
    with BenchServer(work / "ours") as server:
        sb = server.sandbox()
        for _ in range(runs):
            floor.runs.append(size / raw_pty_reader(path) / MB)
            mine.runs.append(size / ours(server, sb, spec)[0] / MB)
    report.notes.append("MB/s of file bytes; both sides read the same cooked PTY (ONLCR adds CRs)")
    return report

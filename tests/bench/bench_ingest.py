"""Ingest: a child's output into the durable journal, against the floor and supervisord.

Pipes: ``head -c N /dev/zero`` (the child of users-and-baselines.md §4.2/§4.3) into
(a) ``cat > /dev/null`` (the raw pipe floor), (b) supervisord 4.3's log, (c) a session of
ours, from POST to the committed ``attempt.exited`` (which lands after every output
event), with the default 64 MiB retention trimming as it goes. An extra row repeats (a)
and (c) with incompressible bytes. PTY: ``cat`` of a base64 text file (§4.4) read by a
plain Python reader on a PTY master, against a ``pty`` session of ours. Runs are
interleaved round-robin so noise spreads over every variant.
"""
from __future__ import annotations

import base64
import os
import pty
import subprocess
import time
from pathlib import Path

from .common import MB, MIB, BenchServer, Report, cpu_seconds
from .supervisord import Supervisord, ensure_installed


def shell_floor(command: str) -> float:
    started = time.perf_counter()
    subprocess.run(["sh", "-c", f"{command} | cat > /dev/null"], check=True)
    return time.perf_counter() - started


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
    child = f"head -c {size} /dev/zero"
    floor = report.figure("raw pipe floor: head | cat", "MB/s")
    sup = report.figure("supervisord 4.3 to its log", "MB/s", baseline=floor.name)
    mine = report.figure("ours: session journal", "MB/s", baseline=(sup.name, floor.name))
    cpu = report.figure("ours: server CPU per GB", "s", higher_is_better=False)
    path, why = ensure_installed(install)
    supervisor = Supervisord(path, work / "supervisord", child) if path is not None else None
    if supervisor is None:
        sup.note = why
    try:
        with BenchServer(work / "ours") as server:
            sb = server.sandbox()
            for _ in range(runs):
                floor.runs.append(size / shell_floor(child) / MB)
                if supervisor is not None:
                    sup.runs.append(size / supervisor.run(size) / MB)
                elapsed, used = ours(server, sb, {"command": ["head", "-c", str(size), "/dev/zero"]})
                mine.runs.append(size / elapsed / MB)
                cpu.runs.append(used / (size / 1e9))
            if incompressible:
                incompressible_rows(report, work, server, sb, size, runs)
    finally:
        if supervisor is not None:
            supervisor.close()
    report.notes.append("zeros compress to almost nothing: the journal writes little, the "
                        "incompressible rows show the cost of storing every byte")
    return report


def incompressible_rows(report: Report, work: Path, server: BenchServer, sb: str, size: int, runs: int) -> None:
    blob = work / "random.bin"
    block = 64 * MIB
    with open(blob, "wb") as f:
        f.write(os.urandom(min(block, size)))
    repeat = max(1, size // block)
    child = f"for i in $(seq {repeat}); do cat {blob}; done"
    total = repeat * min(block, size)
    floor = report.figure("incompressible: raw pipe floor", "MB/s")
    mine = report.figure("incompressible: ours", "MB/s", baseline=floor.name)
    for _ in range(runs):
        floor.runs.append(total / shell_floor(child) / MB)
        elapsed, _cpu = ours(server, sb, {"command": ["sh", "-c", child]})
        mine.runs.append(total / elapsed / MB)


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

"""PTY ingest: a ``pty`` session of ours against a plain Python reader on a PTY master.

Two workloads, each read by both sides with the same child, rounds interleaved:
``cat`` of a base64 text file in 77-byte lines (users-and-baselines.md §4.4: ONLCR turns
each newline into CR LF on the way) and one long line with no newline at all
(``head -c N /dev/zero | tr '\\0' x``), which the terminal passes through untouched. The raw
reader alone swings up to 2x from one run to the next on 2 vCPUs, hence many rounds.
"""
from __future__ import annotations

import base64
import os
import pty
import subprocess
import time
from pathlib import Path

from .common import MB, MIB, BenchServer, Report, cpu_seconds


def text_file(path: Path, size: int) -> int:
    """Base64 text in 77-byte lines (76 + newline), as users-and-baselines.md §4.4."""
    raw = os.urandom(size * 3 // 4)
    text = base64.encodebytes(raw)  # 76-character lines
    path.write_bytes(text[:size])
    return min(size, len(text))


def raw_pty_reader(argv: list[str]) -> float:
    """A Python reader on a PTY master (cooked mode, ONLCR on) until the child's side closes."""
    master, slave = pty.openpty()
    started = time.perf_counter()
    child = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
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


def ours(server: BenchServer, sb: str, argv: list[str]) -> tuple[float, float]:
    """Seconds from POST to the committed exit, and the server's CPU seconds meanwhile."""
    cpu = cpu_seconds(server.pid)
    started = time.perf_counter()
    sid = server.create(sb, {"command": argv, "io": {"mode": "pty"}})
    server.wait_exited(sb, sid)
    return time.perf_counter() - started, cpu_seconds(server.pid) - cpu


def pty_ingest(work: Path, size: int, line_size: int, runs: int) -> Report:
    report = Report(f"PTY ingest: {size / MIB:.0f} MiB of base64 lines (cat), "
                    f"{line_size / MIB:.0f} MiB in one line (head | tr)")
    work.mkdir(parents=True, exist_ok=True)
    path = work / "text.b64"
    size = text_file(path, size)
    workloads = [("base64 lines", ["cat", str(path)], size),
                 ("one long line", ["sh", "-c", f"head -c {line_size} /dev/zero | tr '\\0' x"], line_size)]
    rows = []
    for label, argv, total in workloads:
        floor = report.figure(f"{label}: raw PTY reader (Python os.read)", "MB/s")
        mine = report.figure(f"{label}: ours, pty session journal", "MB/s", baseline=floor.name)
        cpu = report.figure(f"{label}: ours, server CPU per GB", "s", higher_is_better=False)
        # Each round's own ratio: its [min..max] says whether ours kept up in every round.
        each = report.figure(f"{label}: ours / raw reader, round by round", "x")
        rows.append((argv, total, floor, mine, cpu, each))
    with BenchServer(work / "ours") as server:
        sb = server.sandbox()
        for _ in range(runs):
            for argv, total, floor, mine, cpu, each in rows:
                floor.runs.append(total / raw_pty_reader(argv) / MB)
                elapsed, used = ours(server, sb, argv)
                mine.runs.append(total / elapsed / MB)
                cpu.runs.append(used / (total / 1e9))
                each.runs.append(mine.runs[-1] / floor.runs[-1])
    report.notes.append("MB/s of the child's bytes; both sides read the same cooked PTY (ONLCR adds CRs)")
    return report

"""Shared pieces of the benchmark suite: figures, interleaved runs, a server, /proc readings.

Every benchmark measures its baselines in the same invocation and reports medians with
[min..max] and the ratio of each figure to its baseline: the VM is noisy (single runs vary
up to 2.5x), ratios much less.
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import make_http
from tests.helpers import TOKEN, claim_sandbox, ok, spath
from tests.serverproc import ServerProcess

MB = 1_000_000
MIB = 1024 * 1024
KIB = 1024


@dataclass
class Figure:
    """One measured quantity: its runs, and the figure it is compared with (if any)."""

    name: str
    unit: str
    runs: list[float] = field(default_factory=list)
    baseline: tuple = ()  # names of other figures of the same benchmark, to show ratios to
    higher_is_better: bool = True
    note: str = ""

    @property
    def median(self) -> float:
        return statistics.median(self.runs) if self.runs else float("nan")


@dataclass
class Report:
    title: str
    figures: list[Figure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def figure(self, name: str, unit: str, baseline=(), higher_is_better: bool = True,
               note: str = "") -> Figure:
        found = next((f for f in self.figures if f.name == name), None)
        if found is None:
            names = (baseline,) if isinstance(baseline, str) else tuple(baseline)
            found = Figure(name, unit, baseline=names, higher_is_better=higher_is_better, note=note)
            self.figures.append(found)
        return found

    def ratios(self, figure: Figure) -> list[tuple[str, float]]:
        out = []
        for name in figure.baseline:
            base = next((f for f in self.figures if f.name == name), None)
            if base is not None and base.runs and figure.runs and base.median:
                out.append((name, figure.median / base.median))
        return out

    def lines(self) -> list[str]:
        out = [f"## {self.title}"]
        width = max([len(f.name) for f in self.figures] + [10])
        for f in self.figures:
            if not f.runs:
                out.append(f"  {f.name:<{width}}  skipped{': ' + f.note if f.note else ''}")
                continue
            spread = f"[{_fmt(min(f.runs))}..{_fmt(max(f.runs))}]" if len(f.runs) > 1 else ""
            rel = "".join(f"  x{ratio:.2f} of {name};" for name, ratio in self.ratios(f)).rstrip(";")
            note = f"  ({f.note})" if f.note else ""
            out.append(f"  {f.name:<{width}}  {_fmt(f.median):>9} {f.unit:<9}{spread:<22}{rel}{note}")
        out += [f"  - {n}" for n in self.notes]
        return out

    def as_dict(self) -> dict:
        return {"title": self.title, "notes": self.notes, "figures": [
            {"name": f.name, "unit": f.unit, "median": f.median, "runs": f.runs,
             "ratios": dict(self.ratios(f)), "note": f.note} for f in self.figures]}


def _fmt(value: float) -> str:
    if value != value:  # nan
        return "-"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


# ---- /proc ------------------------------------------------------------------------------------
def rss_kib(pid: int, field_name: str = "VmRSS") -> int:
    with open(f"/proc/{pid}/status") as status:
        for row in status:
            if row.startswith(field_name + ":"):
                return int(row.split()[1])
    return 0


def cpu_seconds(pid: int) -> float:
    """utime + stime of one process (not its children)."""
    with open(f"/proc/{pid}/stat", "rb") as stat:
        fields = stat.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# ---- a server under test --------------------------------------------------------------------
class BenchServer:
    """A ``sessiond`` on loopback over its own data dir, started as users start it."""

    def __init__(self, data_dir: Path) -> None:
        self.proc = ServerProcess(data_dir, token=TOKEN, runtime="host", start_timeout=900)
        self.http = None

    def __enter__(self) -> "BenchServer":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> float:
        """Start and return the seconds until /healthz answered (the store is loaded by then)."""
        started = time.perf_counter()
        self.proc.start()
        elapsed = self.start_seconds = time.perf_counter() - started
        self.http = make_http(self.proc.url)
        self.http.timeout = 120.0
        return elapsed

    def stop(self) -> None:
        if self.http is not None:
            self.http.close()
            self.http = None
        self.proc.stop()

    @property
    def pid(self) -> int:
        return self.proc.proc.pid

    @property
    def url(self) -> str:
        return self.proc.url

    def sandbox(self) -> str:
        return claim_sandbox(self.http)

    def create(self, sb: str, spec: dict) -> str:
        return ok(self.http.post(spath(sb), json=spec), 201)["id"]

    def history(self, sb: str, sid: str) -> list[dict]:
        return ok(self.http.get(spath(sb, sid, "/history"), params={"limit": 10000}), 200)["events"]

    def wait_exited(self, sb: str, sid: str, count: int = 1, timeout: float = 600.0,
                    interval: float = 0.005, max_lag: float = 0.02) -> None:
        """Until the journal holds ``count`` attempt.exited (committed after all output).

        Each poll asks only for what was committed since the last one (``after`` = the
        cursor's latest), so a poll costs the server an HTTP round trip, not a scan of the
        session's whole journal: that scan had taken a quarter of the server's CPU during a
        PTY ingest on 2 vCPUs, charged to the figure being measured. The polls thin out as a
        run goes on (every ``max_lag`` of the time elapsed, at least every ``interval``): 200
        polls a second had still been a fifth of the server's Python time during an ingest of
        zeros, and a late poll can only make the figure worse, by at most ``max_lag``.
        """
        started = time.monotonic()
        deadline = started + timeout
        after, seen = 0, 0
        while True:
            page = ok(self.http.get(spath(sb, sid, "/history"), params={"after": after, "limit": 10000}), 200)
            seen += sum(e["type"] == "attempt.exited" for e in page["events"])
            if seen >= count:
                return
            events = page["events"]
            # A full page: read on from its last event; else from the latest committed seq.
            after = events[-1]["seq"] if len(events) == 10000 else page["cursor"]["latest"]
            now = time.monotonic()
            if now > deadline:
                raise TimeoutError(f"session {sid} did not exit within {timeout}s")
            time.sleep(max(interval, (now - started) * max_lag))


@contextmanager
def busy_cpu():
    """One process spinning for as long as the block runs (not pinned: the scheduler places
    it), so a figure shows what one busy CPU of two costs; it is killed and reaped after."""
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.05)  # running before the measured work starts
        yield
    finally:
        spinner.kill()
        spinner.wait(10)


def timed(fn, *args, **kwargs) -> float:
    started = time.perf_counter()
    fn(*args, **kwargs)
    return time.perf_counter() - started

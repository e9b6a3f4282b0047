"""A sandbox's runtime metrics (``GET …/metrics`` and ``…/metrics/catalog``): the catalog, and series built from
cgroup samples (pure).

Samples are what the server read from the sandbox's cgroups and its veth pair at one moment
(``Sample``); every metric is derived from them, and a series is bucketed into steps with the
statistic asked for. Missing data is a gap, never a zero: a runtime restart (a new generation)
starts a new segment, and so does a stretch without samples.
"""
from __future__ import annotations

import math
from typing import NamedTuple


class Sample(NamedTuple):
    at_ns: int
    generation: int
    cpu_ns: int | None
    memory_usage: int | None
    memory_working_set: int | None
    memory_limit: int | None
    pids: int | None
    transmit_bytes: int | None
    receive_bytes: int | None
    transmit_errors: int | None
    receive_errors: int | None
    disk_bytes: int | None
    disk_inodes: int | None


# name -> (kind, unit, dimensions, description)
CATALOG: dict[str, tuple[str, str, list[str], str]] = {
    "sandbox.cpu.utilization": ("gauge", "ratio", [], "CPU used as a share of the CPUs the sandbox may use"),
    "sandbox.cpu.usage": ("gauge", "cores", [], "CPU used, in cores (CPU seconds per second)"),
    "sandbox.cpu.time": ("counter", "seconds", [], "CPU time used by the sandbox's processes"),
    "sandbox.cpu.limit": ("gauge", "cores", [], "CPUs the sandbox may use (no quota: the machine's CPUs)"),
    "sandbox.memory.usage": ("gauge", "bytes", [], "memory charged to the sandbox, page cache included"),
    "sandbox.memory.working_set": ("gauge", "bytes", [], "memory in use minus inactive page cache"),
    "sandbox.memory.available": ("gauge", "bytes", [], "memory limit minus the working set"),
    "sandbox.memory.limit": ("gauge", "bytes", [], "the sandbox's memory limit"),
    "sandbox.memory.utilization": ("gauge", "ratio", [], "working set as a share of the limit"),
    "sandbox.network.io": ("counter", "bytes", ["direction"], "bytes through the sandbox's interface"),
    "sandbox.network.errors": ("counter", "count", ["direction"], "errors on the sandbox's interface"),
    "sandbox.process.count": ("gauge", "count", [], "processes and threads in the sandbox"),
    "sandbox.rootfs.writable.usage": ("gauge", "bytes", [], "disk the sandbox's workspace takes"),
    "sandbox.rootfs.writable.inodes": ("gauge", "count", [], "files and directories in the workspace"),
}
DEFAULT_METRICS = ("sandbox.cpu.utilization", "sandbox.memory.utilization", "sandbox.network.io")
STATISTICS = ("auto", "average", "last", "maximum", "minimum", "rate")
RATE_UNITS = {"bytes": "bytes_per_second", "count": "count_per_second", "seconds": "cores"}
DIRECTIONS = ("transmit", "receive")


def catalog() -> list[dict]:
    return [{"name": name, "kind": kind, "unit": unit, "dimensions": dims, "description": text}
            for name, (kind, unit, dims, text) in CATALOG.items()]


def _values(metric: str, prev: Sample | None, sample: Sample, cpus: float, direction: str) -> float | None:
    """The metric at one sample (``prev``: the one before it in the same generation, for rates)."""
    ws, limit = sample.memory_working_set, sample.memory_limit
    if metric in ("sandbox.cpu.usage", "sandbox.cpu.utilization"):
        if prev is None or prev.cpu_ns is None or sample.cpu_ns is None or sample.at_ns <= prev.at_ns:
            return None
        cores = max(0, sample.cpu_ns - prev.cpu_ns) / (sample.at_ns - prev.at_ns)
        return cores if metric == "sandbox.cpu.usage" else cores / cpus
    simple = {"sandbox.cpu.time": None if sample.cpu_ns is None else sample.cpu_ns / 1e9,
              "sandbox.cpu.limit": cpus, "sandbox.memory.usage": sample.memory_usage,
              "sandbox.memory.working_set": ws, "sandbox.memory.limit": limit,
              "sandbox.memory.available": None if ws is None or limit is None else max(0, limit - ws),
              "sandbox.memory.utilization": None if ws is None or not limit else ws / limit,
              "sandbox.process.count": sample.pids, "sandbox.rootfs.writable.usage": sample.disk_bytes,
              "sandbox.rootfs.writable.inodes": sample.disk_inodes}
    if metric in simple:
        return simple[metric]
    kind = "bytes" if metric == "sandbox.network.io" else "errors"
    return getattr(sample, f"{direction}_{kind}")


def build_series(samples: list[Sample], metric: str, start_ns: int, end_ns: int, step_s: int, statistic: str,
                 cpus: float, interval_s: float) -> tuple[list[dict], list[dict]]:
    """(series, gaps) of one metric over [start, end]: one series, or one per direction."""
    kind, unit, dims, _ = CATALOG[metric]
    effective = ("rate" if kind == "counter" else "average") if statistic == "auto" else statistic
    series, gaps = [], []
    for direction in (DIRECTIONS if dims else ("",)):
        raw, gap_list = _raw_points(samples, metric, start_ns, end_ns, cpus, direction, interval_s)
        if effective == "rate":
            raw = [_rates(segment) for segment in raw]
        segments = [{"points": _bucket(segment, start_ns, step_s, effective)} for segment in raw]
        segments = [s for s in segments if s["points"]]
        dimensions = {"direction": direction} if direction else None
        for gap in gap_list:
            gaps.append({"metric": metric, **gap, **({"dimensions": dimensions} if dimensions else {})})
        if not segments:
            continue
        entry = {"metric": metric, "kind": kind, "unit": RATE_UNITS.get(unit, unit) if effective == "rate" else unit,
                 "statistic": effective, "segments": segments}
        if dimensions:
            entry["dimensions"] = dimensions
        series.append(entry)
    return series, gaps


def _raw_points(samples, metric, start_ns, end_ns, cpus, direction, interval_s):
    """Segments of (time, value) and the gaps between them (reasons as the contract names them)."""
    late = int(interval_s * 2.5 * 1e9)  # a sample this much later than the one before: data is missing
    segments, gaps, current, prev = [], [], [], None
    for sample in samples:
        if prev is not None and (sample.generation != prev.generation or sample.at_ns - prev.at_ns > late):
            if current:
                segments.append(current)
                current = []
            if start_ns <= sample.at_ns and prev.at_ns <= end_ns:
                reason = "series_reset" if sample.generation != prev.generation else "no_data"
                gaps.append(_gap(max(prev.at_ns, start_ns), min(sample.at_ns, end_ns), reason))
            prev = None
        value = _values(metric, prev, sample, cpus, direction)
        prev = sample
        if value is not None and start_ns <= sample.at_ns <= end_ns:
            current.append((sample.at_ns, float(value)))
    if current:
        segments.append(current)
    points = [p for segment in segments for p in segment]
    if not points:
        return [], [_gap(start_ns, end_ns, "no_data")]
    if points[0][0] - start_ns > late:
        gaps.insert(0, _gap(start_ns, points[0][0], "no_data"))
    if end_ns - points[-1][0] > late:
        gaps.append(_gap(points[-1][0], end_ns, "no_data"))
    return segments, gaps


def _rates(segment: list[tuple[int, float]]) -> list[tuple[int, float]]:
    return [(t, max(0.0, v - pv) / ((t - pt) / 1e9)) for (pt, pv), (t, v) in zip(segment, segment[1:]) if t > pt]


def _bucket(points: list[tuple[int, float]], start_ns: int, step_s: int, statistic: str) -> list[dict]:
    step_ns = step_s * 1_000_000_000
    buckets: dict[int, list[float]] = {}
    for at, value in points:
        buckets.setdefault((at - start_ns) // step_ns, []).append(value)
    pick = {"average": lambda v: sum(v) / len(v), "rate": lambda v: sum(v) / len(v), "last": lambda v: v[-1],
            "maximum": max, "minimum": min}[statistic]
    return [{"time_ns": start_ns + index * step_ns, "value": pick(values)} for index, values in sorted(buckets.items())]


def _gap(start: int, end: int, reason: str) -> dict:
    return {"start_ns": start, "end_ns": end, "reason": reason}


def effective_step(start_ns: int, end_ns: int, step_s: int | None, max_points: int, interval_s: float) -> int:
    """At least the sampling interval, and large enough that the range fits in ``max_points``."""
    span_s = (end_ns - start_ns) / 1e9
    return max(step_s or 1, math.ceil(interval_s), math.ceil(span_s / max_points))


def freshness(samples: list[Sample], now_ns: int, interval_s: float) -> dict:
    if not samples:
        return {"status": "missing"}
    age = (now_ns - samples[-1].at_ns) / 1e9
    return {"status": "fresh" if age <= interval_s * 2.5 else "stale", "newest_ns": samples[-1].at_ns,
            "age_seconds": round(age, 3)}

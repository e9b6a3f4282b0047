"""``GET /api/v1/sandboxes/{id}/metrics`` and ``…/metrics/catalog``:
series built from the sandbox's cgroup samples (``infra/metrics_sampler.py``)."""
from __future__ import annotations

import time

from sanic import Blueprint, Request

from session_supervisor.domain.model import metrics as m
from session_supervisor.domain.model.timefmt import rfc3339

from ..observability_query import bad, parse_time
from ..schemas import ok

bp = Blueprint("sandbox_metrics", url_prefix="/api/v1/sandboxes/<sandbox_id>/metrics")
MAX_RANGE_S = 30 * 86400


@bp.get("/catalog", ctx_action="get_sandbox_metrics_catalog")
async def metrics_catalog(request: Request, sandbox_id: str):
    """200 {metrics: [{name, kind, unit, dimensions, description}]}; 404 not_found."""
    request.app.ctx.container.manager.registry.sandbox(sandbox_id)
    return ok({"metrics": m.catalog()})


@bp.get("", ctx_action="get_sandbox_metrics", strict_slashes=False)
async def sandbox_metrics(request: Request, sandbox_id: str):
    """200 {start_time, end_time, step_seconds, series, freshness, gaps, partial}; 400; 404."""
    container = request.app.ctx.container
    container.manager.registry.sandbox(sandbox_id)
    args = request.args
    now = time.time_ns()
    end = parse_time(args.get("end_time"), "end_time") or now
    start = parse_time(args.get("start_time"), "start_time") or end - 3600 * 1_000_000_000
    if end <= start:
        raise bad("end_time must be after start_time")
    if (end - start) / 1e9 > MAX_RANGE_S:
        raise bad("the time range must be at most 30 days")
    names = [n.strip() for n in args.get("metrics", "").split(",") if n.strip()] or list(m.DEFAULT_METRICS)
    for name in names:
        if name not in m.CATALOG:
            raise bad(f"unknown metric {name}")
    statistic = args.get("statistic", "auto")
    if statistic not in m.STATISTICS:
        raise bad("invalid statistic")
    step = _int(args.get("step_seconds"), "step_seconds", 1, 86400)
    max_points = _int(args.get("max_points"), "max_points", 1, 1000) or 240
    sampler = container.metrics
    interval = sampler.interval_s if sampler else 15.0
    step = m.effective_step(start, end, step, max_points, interval)
    samples = sampler.samples(sandbox_id) if sampler else []
    series, gaps = [], []
    for name in dict.fromkeys(names):
        found, missing = m.build_series(samples, name, start, end, step, statistic, sampler.cpus if sampler else 1.0,
                                        interval)
        series += [_render_series(s) for s in found]
        gaps += [_render_gap(g) for g in missing]
    fresh = m.freshness(samples, now, interval)
    freshness = {"status": fresh["status"]}
    if "newest_ns" in fresh:
        freshness.update(newest_observed_at=rfc3339(fresh["newest_ns"]), age_seconds=fresh["age_seconds"])
    return ok({"start_time": rfc3339(start), "end_time": rfc3339(end), "step_seconds": step, "series": series,
               "freshness": freshness, "gaps": gaps, "partial": bool(gaps) or not series})


def _int(value, name: str, low: int, high: int) -> int | None:
    if value is None or value == "":
        return None
    try:
        number = int(value)
    except ValueError:
        raise bad(f"invalid {name}") from None
    if not low <= number <= high:
        raise bad(f"{name} must be between {low} and {high}")
    return number


def _render_series(series: dict) -> dict:
    out = dict(series)
    out["segments"] = [{"points": [{"time": rfc3339(p["time_ns"]), "value": p["value"]} for p in s["points"]]}
                       for s in series["segments"]]
    return out


def _render_gap(gap: dict) -> dict:
    out = {"metric": gap["metric"], "start_time": rfc3339(gap["start_ns"]), "end_time": rfc3339(gap["end_ns"]),
           "reason": gap["reason"]}
    if "dimensions" in gap:
        out["dimensions"] = gap["dimensions"]
    return out

"""Many live sessions: create rate, server RSS per session, API latency under that load.

Every session runs ``cat`` (a live process waiting for input, with its pipes, input
pump and exit watcher). Latencies are measured first with one live session and again
with all of them, so the ratio shows what the load costs. Creates run 16 at a time.
"""
from __future__ import annotations

import asyncio
import base64
import json
import random
import resource
import time
from pathlib import Path

from tests.helpers import TOKEN, spath

from .common import BenchServer, Report, cpu_seconds, percentile, rss_kib
from .loadgen import Connection

CONCURRENCY = 16


async def create_many(url: str, sb: str, count: int) -> tuple[list[str], float]:
    """``count`` creates over CONCURRENCY keep-alive connections, each one request at a time."""
    ids: list[str] = []
    names = iter(range(count))
    connections = [await Connection.open(url, TOKEN) for _ in range(min(CONCURRENCY, count))]

    async def worker(conn: Connection) -> None:
        for i in names:
            status, body = await asyncio.wait_for(
                conn.request("POST", spath(sb), {"command": ["cat"], "name": f"s{i}"}), 120)
            assert status == 201, body
            ids.append(json.loads(body)["data"]["id"])

    try:
        started = time.perf_counter()
        await asyncio.gather(*(worker(conn) for conn in connections))
        return ids, time.perf_counter() - started
    finally:
        for conn in connections:
            await conn.close()


def latencies(server: BenchServer, sb: str, ids: list[str], scale: int,
              share: float) -> dict[str, list[float]]:
    http = server.http
    rng = random.Random(7)
    calls = {
        "GET session": lambda i: http.get(spath(sb, rng.choice(ids))),
        "GET events page": lambda i: http.get(spath(sb, rng.choice(ids), "/events"), params={"after": 0}),
        "POST input": lambda i: http.post(spath(sb, rng.choice(ids), "/inputs"), json={
            "input_id": f"lat-{scale}-{i}", "data_base64": base64.b64encode(b"x\n").decode()}),
        "GET session list": lambda i: http.get(spath(sb)),
    }
    counts = {"GET session": 300, "GET events page": 200, "POST input": 200, "GET session list": 20}
    out: dict[str, list[float]] = {}
    for name, call in calls.items():
        samples = []
        for i in range(max(5, int(counts[name] * share))):
            started = time.perf_counter()
            resp = call(i)
            samples.append(time.perf_counter() - started)
            assert resp.status_code in (200, 202), resp.text
        out[name] = samples
    return out


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def wait_running(server: BenchServer, sb: str, count: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while True:
        sessions = server.http.get(spath(sb)).json()["data"]["sessions"]
        if sum(s["phase"] == "running" for s in sessions) >= count:
            return
        if time.monotonic() > deadline:
            raise TimeoutError("sessions did not all reach running")
        time.sleep(0.2)


def many_sessions(work: Path, count: int) -> Report:
    report = Report(f"{count:,} concurrent live sessions (cat)")
    with BenchServer(work / "ours") as server:
        sb = server.sandbox()
        first, _ = asyncio.run(create_many(server.url, sb, 1))
        share = min(1.0, count / 1000)  # fewer samples in smoke mode
        idle = latencies(server, sb, first, 1, share)
        before = rss_kib(server.pid)
        server_cpu, client_cpu = cpu_seconds(server.pid), _own_cpu()
        ids, elapsed = asyncio.run(create_many(server.url, sb, count))
        server_cpu, client_cpu = cpu_seconds(server.pid) - server_cpu, _own_cpu() - client_cpu
        wait_running(server, sb, count + 1)
        after = rss_kib(server.pid)
        loaded = latencies(server, sb, first + ids, count, share)
        report.figure("create rate", "sessions/s").runs.append(count / elapsed)
        report.figure("server CPU per create", "ms", higher_is_better=False).runs.append(
            server_cpu / count * 1000)
        report.figure("load client CPU per create", "ms", higher_is_better=False).runs.append(
            client_cpu / count * 1000)
        report.figure("server RSS per live session", "KiB", higher_is_better=False).runs.append(
            (after - before) / count)
        report.figure("server RSS total", "MiB", higher_is_better=False).runs.append(after / 1024)
        for name in idle:
            for q in (50, 99):
                base = report.figure(f"{name} p{q}, 1 session", "ms", higher_is_better=False)
                base.runs.append(percentile(idle[name], q) * 1000)
                report.figure(f"{name} p{q}, {count:,} sessions", "ms", baseline=base.name,
                              higher_is_better=False).runs.append(percentile(loaded[name], q) * 1000)
        server.http.delete(f"/api/v1/sandboxes/{sb}")
    return report

"""Pause/resume figures for issue 6 (run by hand; not collected by pytest).

    python tests/bench/bench_pause_resume.py [cycles] [sessions]

1. Over HTTP against a real server (uvloop, runtime host): ``cycles`` pause/resume cycles of
   one sandbox with ``sessions`` ``sleep`` sessions; pause and resume latency per decile.
2. In process: resume time of a sandbox whose one session holds 10, 10k and 100k events,
   to show resume reads one snapshot and an empty tail, not the journal.
"""
from __future__ import annotations

from session_supervisor.api import commands

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.conftest import make_http  # noqa: E402
from tests.helpers import claim_sandbox, create_session, ok  # noqa: E402
from tests.serverproc import ServerProcess  # noqa: E402
from tests.service.test_pause_resume import started  # noqa: E402

TOKEN = "bench"


def over_http(cycles: int, sessions: int) -> None:
    with tempfile.TemporaryDirectory() as tmp, ServerProcess(Path(tmp), token=TOKEN) as srv, \
            make_http(srv.url, TOKEN) as http:
        sb = claim_sandbox(http)
        for _ in range(sessions):
            create_session(http, sb, {"command": ["sleep", "600"]})
        pauses, resumes = [], []
        for _ in range(cycles):
            t = time.perf_counter()
            ok(http.post(f"/api/v1/sandboxes/{sb}/pause", json={}), 200)
            pauses.append(time.perf_counter() - t)
            t = time.perf_counter()
            ok(http.post(f"/api/v1/sandboxes/{sb}/resume", json={}), 200)
            resumes.append(time.perf_counter() - t)
        generation = ok(http.get(f"/api/v1/sandboxes/{sb}"), 200)["runtime_generation"]
        print(f"HTTP, {sessions} sessions, {cycles} cycles -> generation {generation}")
        step = max(1, cycles // 10)
        for name, values in (("pause", pauses), ("resume", resumes)):
            deciles = [f"{1000 * statistics.median(values[i:i + step]):.1f}" for i in range(0, cycles, step)]
            print(f"  {name:6} median ms per {step} cycles: {' '.join(deciles)}")


async def resume_with_journal(events: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        async with started(Path(tmp)) as manager:
            sandbox = await manager.claim("default", {})
            runtime = manager.registry.runtime_for(sandbox.id)
            session, _ = await commands.create_session(runtime, {"command": ["sleep", "600"]}, "")
            for start in range(0, events, 1000):  # batches: one aggregate never holds 100k pending
                for _ in range(min(1000, events - start)):
                    session.record_output("stdout", b"x" * 64, manager.clock.now_ns())
                runtime.pipeline.stage(runtime.store, session)
                await runtime.pipeline.flush()
            await manager.transitions.pause(sandbox.id)
            t = time.perf_counter()
            await manager.transitions.resume(sandbox.id)
            return time.perf_counter() - t


def main() -> None:
    cycles = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    sessions = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    over_http(cycles, sessions)
    for events in (10, 10_000, 100_000):
        print(f"in process: resume with a {events}-event journal: "
              f"{1000 * asyncio.run(resume_with_journal(events)):.1f} ms")


if __name__ == "__main__":
    main()

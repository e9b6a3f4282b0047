"""Pause and resume of a sandbox with a live PTY shell, as an SDK's client sees them.

The hardened runtime with a network namespace, an httpx client on loopback: a sandbox runs
``bash`` on a terminal (typed into once, so it is a shell in use), then each round pauses it
(POST …/pause until its answer: the checkpoint committed, the runtime released) and resumes it
(POST …/resume until its answer: the store reopened, a new generation, the shell started again
by its ``runtime_recovery``), and waits for the shell's prompt on the new attempt, outside the
clock. Baselines in the same run, interleaved: the ``unshare --net`` + bubblewrap ``echo`` floor
(what any start of a sandboxed process costs here) and a claim of a new sandbox to its answer.
"""
from __future__ import annotations

import base64
import os
import shutil
import time
from pathlib import Path

import httpx

from tests.helpers import TOKEN, b64, ok
from tests.serverproc import ServerProcess

from .bench_claim import floor_argv, floor_once
from .common import Report, percentile

U = "/api/v1/sandboxes"
SHELL = {"command": ["bash", "--noprofile", "--norc"], "io": {"mode": "pty"},
         "env": {"PS1": "ready$ "}, "lifecycle": {"stop_grace_period_seconds": 1}}


def wait_prompt(http: httpx.Client, sandbox: str, sid: str, after: int, timeout: float = 30.0) -> int:
    """The seq of the first output event after ``after`` holding the prompt."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        events = ok(http.get(f"{U}/{sandbox}/sessions/{sid}/events", params={"after": after}), 200)["events"]
        for event in events:
            if event["type"] == "output" and b"ready$" in base64.b64decode(event["data_base64"]):
                return event["seq"]
        if events:
            after = events[-1]["seq"]
        time.sleep(0.01)
    raise TimeoutError(f"the shell of {sandbox} printed no prompt within {timeout} s")


def pause_resume(work: Path, rounds: int) -> Report:
    report = Report("pause / resume of a sandbox with a live PTY shell (httpx, hardened runtime, netns)")
    floor = report.figure("floor: unshare --net + bwrap echo, p50", "ms", higher_is_better=False)
    claim = report.figure("claim of a new sandbox until its 201, p50", "ms", higher_is_better=False)
    pause = report.figure("pause until its answer, p50", "ms", baseline=[floor.name], higher_is_better=False)
    resume = report.figure("resume until its answer, p50", "ms", baseline=[floor.name, claim.name],
                           higher_is_better=False)
    pause90 = report.figure("pause p90", "ms", higher_is_better=False)
    resume90 = report.figure("resume p90", "ms", higher_is_better=False)
    if os.geteuid() != 0 or not shutil.which("bwrap"):
        floor.note = "needs root and bubblewrap"
        return report
    server = ServerProcess(work / "server", token=TOKEN, runtime="bwrap", extra_env={"SESSIOND_NETWORK": "netns"})
    argv = floor_argv()
    times: dict[str, list[float]] = {"floor": [], "claim": [], "pause": [], "resume": []}
    try:
        server.start()
        with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60.0) as http:
            sandbox = ok(http.post(U, json={"template": "default"}), 201, allow_nulls=True)["sandbox_id"]
            sid = ok(http.post(f"{U}/{sandbox}/sessions", json=SHELL), 201)["id"]
            seen = wait_prompt(http, sandbox, sid, 0)
            ok(http.post(f"{U}/{sandbox}/sessions/{sid}/inputs",
                         json={"input_id": "ls", "data_base64": b64(b"ls /\n")}), 202)
            for _ in range(rounds):
                times["floor"].append(floor_once(argv))
                started = time.perf_counter()
                other = ok(http.post(U, json={"template": "default"}), 201, allow_nulls=True)["sandbox_id"]
                times["claim"].append(time.perf_counter() - started)
                ok(http.delete(f"{U}/{other}"), 202)
                started = time.perf_counter()
                ok(http.post(f"{U}/{sandbox}/pause", json={"memory": False}), 200)
                times["pause"].append(time.perf_counter() - started)
                started = time.perf_counter()
                ok(http.post(f"{U}/{sandbox}/resume", json={"memory": False}), 200)
                times["resume"].append(time.perf_counter() - started)
                seen = wait_prompt(http, sandbox, sid, seen)  # the shell is back, in use again
            ok(http.delete(f"{U}/{sandbox}"), 202)
    finally:
        server.stop()
    for figure, key in ((floor, "floor"), (claim, "claim"), (pause, "pause"), (resume, "resume")):
        figure.runs = [1000 * percentile(times[key], 50)]
    pause90.runs = [1000 * percentile(times["pause"], 90)]
    resume90.runs = [1000 * percentile(times["resume"], 90)]
    report.notes.append(f"{rounds} rounds, the floor, a claim, the pause and the resume interleaved")
    return report

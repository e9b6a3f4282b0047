"""Sandbox start overhead (issue 11): launch-to-running p50 before and after hardening.

"Running" means the command itself runs inside the sandbox: the time from the runner's
start call to the command's first output byte (``echo ready``), through the same
``PipeRunner`` the server uses. Three variants, interleaved round-robin so that load on
the shared VM hits them alike:

- host: no sandbox (the floor);
- bwrap before: the runtime as it was before issue 11 (root, shared user/IPC/UTS, no
  cgroups, no seccomp), i.e. ``BubblewrapLauncher`` without hardening;
- bwrap hardened: per-sandbox uid, cgroups, seccomp, private mount ns staging (the
  server's runtime now).
"""
from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from session_supervisor.infra.pipe_runner import PipeRunner
from session_supervisor.infra.bubblewrap import BubblewrapLauncher, HostLauncher, detect_launcher

from .common import Report, percentile

ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin"}


async def _start_once(bound, workspace: str, attempt: str) -> float:
    first = asyncio.get_running_loop().create_future()

    def on_output(stream: str, data: bytes) -> None:
        if not first.done():
            first.set_result(time.perf_counter())

    launch = bound.launch(workspace, ["sh", "-c", "echo ready"], "", dict(ENV), None, attempt_id=attempt)
    began = time.perf_counter()
    handle = await PipeRunner().start(launch, on_output)
    ready = await asyncio.wait_for(first, 30)
    status = await handle.wait_exited()
    bound.translate_exit(status, attempt)
    return ready - began


async def _measure(work: Path, rounds: int) -> dict[str, list[float]]:
    hardened = detect_launcher("bwrap", work_dir=str(work / "runtime"))
    variants = {"host": HostLauncher(), "bwrap before": BubblewrapLauncher(hardened._bwrap, hardened._env),
                "bwrap hardened": hardened}
    bound = {}
    for name, runtime in variants.items():
        workspace = work / "sandboxes" / name.replace(" ", "-") / "workspace"
        workspace.mkdir(parents=True)
        bound[name] = (runtime.isolate(name.replace(" ", "-"), str(workspace), {}), str(workspace))
    samples: dict[str, list[float]] = {name: [] for name in variants}
    try:
        for i in range(rounds + 2):
            for name, (runtime, workspace) in bound.items():
                took = await _start_once(runtime, workspace, f"att-{i}")
                if i >= 2:  # warm-up: page cache, first cgroup creation
                    samples[name].append(took)
    finally:
        for runtime, _ in bound.values():
            runtime.release()
    return samples


def sandbox_start(work: Path, rounds: int) -> Report:
    report = Report(f"sandbox start: launch to the command's first output ({rounds} rounds)")
    if os.geteuid() != 0:
        report.notes.append("not root: the hardened runtime runs without a per-sandbox uid or cgroups")
    samples = asyncio.run(_measure(work, rounds))
    host = report.figure("host p50", "ms", higher_is_better=False)
    host.runs.append(percentile(samples["host"], 50) * 1000)
    before = report.figure("bwrap before p50", "ms", baseline=host.name, higher_is_better=False)
    before.runs.append(percentile(samples["bwrap before"], 50) * 1000)
    after = report.figure("bwrap hardened p50", "ms", baseline=(before.name, host.name),
                          higher_is_better=False)
    after.runs.append(percentile(samples["bwrap hardened"], 50) * 1000)
    for name in ("bwrap before", "bwrap hardened"):
        report.figure(f"{name} p99", "ms", higher_is_better=False).runs.append(
            percentile(samples[name], 99) * 1000)
    return report

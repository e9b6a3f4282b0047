"""``sessionctl run -- CMD``: the wall time of one whole run against the Python SDK doing the same.

A run is a claim, one command with its output relayed, and a delete. The baseline is the
same three calls made by the official Python SDK (``claim``, ``sb.cmd``, ``delete``) in a
fresh ``python -c`` process, as a user's script would; both are interleaved round-robin on
one server (the hardened runtime when bubblewrap is there: what a user gets).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from tests.serverproc import ServerProcess

from .common import Report

SDK_RUN = ("import os, sandbox0; c = sandbox0.Client(token=os.environ['SESSIOND_TOKEN'], "
           "base_url=os.environ['SESSIOND_URL']); sb = c.sandboxes.claim('default'); "
           "print(sb.cmd(\"sh -c 'echo out'\").stdout, end=''); c.sandboxes.delete(sb.id)")


def _wall(argv: list[str], env: dict) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    elapsed = time.perf_counter() - started
    if done.stdout != "out\n":
        raise RuntimeError(f"{argv[0]} printed {done.stdout!r}: {done.stderr[-500:]}")
    return elapsed


def run_vs_sdk(work: Path, rounds: int) -> Report:
    runtime = "bwrap" if shutil.which("bwrap") else "host"
    report = Report(f"sessionctl run: claim, one command, delete ({rounds} rounds each, interleaved, {runtime})")
    work.mkdir(parents=True, exist_ok=True)
    sessionctl = str(Path(sys.executable).with_name("sessionctl"))
    with ServerProcess(work / "data", token="bench-token", runtime=runtime) as server:
        env = {**os.environ, "SESSIOND_URL": server.url, "SESSIOND_TOKEN": "bench-token",
               "PYTHONPYCACHEPREFIX": str(work / "pycache")}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        variants = {"sessionctl run": [sessionctl, "run", "--", "sh", "-c", "echo out"],
                    "Python SDK, fresh process": [sys.executable, "-c", SDK_RUN]}
        for argv in variants.values():  # bytecode written, page cache warm
            _wall(argv, env)
        for _ in range(rounds):
            for name, argv in variants.items():
                baseline = "Python SDK, fresh process" if name == "sessionctl run" else ()
                report.figure(name, "ms", baseline=baseline, higher_is_better=False).runs.append(
                    _wall(argv, env) * 1000)
    ours, theirs = (next(f for f in report.figures if f.name == n).median for n in variants)
    report.notes.append(f"target: no slower than the SDK: {'met' if ours <= theirs else 'MISSED'} "
                        f"({ours:.0f} ms against {theirs:.0f} ms)")
    return report

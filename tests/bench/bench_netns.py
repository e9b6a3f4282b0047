"""Sandbox start time with and without a network namespace (issue 12).

Create-to-running: from the claim request until the sandbox's first session (``sleep``, under
bubblewrap) is ``running``; the claim creates the namespace, the veth pair and the nftables
rules. Two servers run side by side, one with ``--network netns`` and one with ``--network
host``, and the samples alternate between them so both see the same machine load.
"""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from tests.conftest import make_http
from tests.helpers import TOKEN, claim_sandbox, ok, spath
from tests.serverproc import ServerProcess

from .common import Report, percentile

SLEEP = {"command": ["sleep", "600"]}


def start_time(work: Path, samples: int) -> Report:
    report = Report("sandbox start (claim -> first session running), bwrap runtime")
    with_ns = report.figure("p50 with a network namespace", "ms", baseline="p50 sharing the host's network",
                            higher_is_better=False)
    without = report.figure("p50 sharing the host's network", "ms", higher_is_better=False)
    p90s = {"netns": report.figure("p90 with a network namespace", "ms", higher_is_better=False),
            "host": report.figure("p90 sharing the host's network", "ms", higher_is_better=False)}
    if os.geteuid() != 0 or not shutil.which("bwrap"):
        for figure in (with_ns, without, *p90s.values()):
            figure.note = "needs root and bubblewrap"
        return report
    servers = {mode: ServerProcess(work / mode, token=TOKEN, runtime="bwrap",
                                   extra_env={"SESSIOND_NETWORK": mode}) for mode in ("netns", "host")}
    times: dict[str, list[float]] = {"netns": [], "host": []}
    try:
        for server in servers.values():
            server.start()
        clients = {mode: make_http(server.url) for mode, server in servers.items()}
        for _ in range(samples):
            for mode, http in clients.items():  # interleaved: the same load for both
                times[mode].append(_one_start(http))
        for http in clients.values():
            http.close()
    finally:
        for server in servers.values():
            server.stop()
    with_ns.runs = [1000 * percentile(times["netns"], 50)]
    without.runs = [1000 * percentile(times["host"], 50)]
    for mode, figure in p90s.items():
        figure.runs = [1000 * percentile(times[mode], 90)]
    report.notes.append(f"{samples} starts each, interleaved")
    return report


def _one_start(http) -> float:
    started = time.perf_counter()
    sandbox = claim_sandbox(http)
    sid = ok(http.post(spath(sandbox), json=SLEEP), 201)["id"]
    while ok(http.get(spath(sandbox, sid)), 200)["phase"] != "running":
        if time.perf_counter() - started > 60:
            raise TimeoutError(f"sandbox {sandbox} did not start within 60 s")
        time.sleep(0.002)
    elapsed = time.perf_counter() - started
    ok(http.delete(f"/api/v1/sandboxes/{sandbox}"), 202)
    return elapsed

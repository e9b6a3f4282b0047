"""What binding a sandbox volume at /workspace adds to a claim (hardened runtime).

One hardened server; each round claims three sandboxes from ``default``, one after the other, each
timed from the claim's request to its 201 and then to a command's output (``cat`` of a file in
/workspace, through a context that waits):

- no volume (the baseline);
- the same volume every round ("warm": its disk is still loop-mounted on the node from the last
  round, so the claim only binds that mount into the sandbox, idmapped);
- a new volume every round ("cold": the claim loop-mounts its disk first; the volume is made
  before the clock starts).

Each sandbox is deleted before the next claim, so the RWO volume is free again. The rounds
interleave the three, so they see the same machine load.
"""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from tests.conftest import make_http
from tests.helpers import TOKEN, ok
from tests.serverproc import ServerProcess

from .common import Report, percentile

U, V = "/api/v1/sandboxes", "/api/v1/sandboxvolumes"
READ = {"type": "cmd", "cmd": {"command": ["sh", "-c", "cat /workspace/hello 2>/dev/null || echo none"]},
        "wait_until_done": True}


def _timed_claim(http, volume: str | None) -> tuple[float, float]:
    body: dict = {"template": "default"}
    if volume:
        body["mounts"] = [{"sandboxvolume_id": volume, "mount_point": "/workspace"}]
    started = time.perf_counter()
    sandbox = ok(http.post(U, json=body), 201)["sandbox_id"]
    claimed = time.perf_counter() - started
    ok(http.post(f"{U}/{sandbox}/contexts", json=READ), 201)
    first = time.perf_counter() - started
    ok(http.delete(f"{U}/{sandbox}"), 202)
    return claimed, first


def volume_bind(work: Path, samples: int) -> Report:
    report = Report("claim with a volume at /workspace vs without (bwrap runtime)")
    names = {"none": "no volume", "warm": "volume, disk mounted", "cold": "new volume"}
    claim = {k: report.figure(f"claim p50, {n}", "ms", baseline=() if k == "none" else "claim p50, no volume",
                              higher_is_better=False) for k, n in names.items()}
    first = {k: report.figure(f"claim to output p50, {n}", "ms",
                              baseline=() if k == "none" else "claim to output p50, no volume",
                              higher_is_better=False) for k, n in names.items()}
    made = report.figure("volume create (64 MiB disk)", "ms", higher_is_better=False)
    problem = None
    if os.geteuid() != 0 or shutil.which("mkfs.ext4") is None:
        problem = "volumes are loop-mounted disks: root and e2fsprogs"
    elif shutil.which("bwrap") is None:
        problem = "bubblewrap is not installed"
    if problem:
        for figure in (*claim.values(), *first.values(), made):
            figure.note = problem
        return report
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in names}
    server = ServerProcess(work / "data", token=TOKEN, runtime="bwrap", extra_args=["--volume-size", "64Mi"])
    try:
        server.start()
        with make_http(server.url) as http:
            warm = ok(http.post(V, json={"access_mode": "RWO"}), 201)["id"]
            ok(http.post(f"{V}/{warm}/files", params={"path": "hello"}, content=b"hi\n"), 200)
            _timed_claim(http, None)  # warm-up: page cache, first cgroups, the warm volume's mount
            _timed_claim(http, warm)
            for _ in range(samples):
                times["none"].append(_timed_claim(http, None))
                times["warm"].append(_timed_claim(http, warm))
                began = time.perf_counter()
                cold = ok(http.post(V, json={"access_mode": "RWO"}), 201)["id"]
                made.runs.append(1000 * (time.perf_counter() - began))
                times["cold"].append(_timed_claim(http, cold))
                ok(http.delete(f"{V}/{cold}"), 200)
            ok(http.delete(f"{V}/{warm}"), 200)
    finally:
        server.stop()
    for key in names:
        claim[key].runs = [1000 * percentile([c for c, _ in times[key]], 50)]
        first[key].runs = [1000 * percentile([f for _, f in times[key]], 50)]
    report.notes.append(f"{samples} rounds, interleaved; a claim's bind is synchronous (its 201 comes "
                        f"after the mount), so the claim figure holds all of it")
    return report

"""Rootfs snapshot, restore, fork and template-from-sandbox: latency and the disk each adds, for a
sandbox with an empty workspace against one with ``fill`` bytes (1 GiB in the full run) in it.

One hardened server with a disk per sandbox and the disk pool (docs/snapshots-and-forks.md). Two
running sources, ``empty`` and ``full``; two paused targets for restores. Each round, for each
source in turn: a snapshot (POST …/snapshots), a restore of it into the paused target, a fork
(POST …/fork, the child paused and untouched), a template from the source (POST
/templates/from-sandbox until ``ready``); each call timed from the client, and the disk pool's
used bytes read before and after (blocks shared by reflinks count once: what the copy really
added). Then everything made in the round is deleted again. The first round is a warm-up.
"""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from tests.conftest import make_http
from tests.helpers import TOKEN, claim_sandbox, ok
from tests.serverproc import ServerProcess

from .common import MIB, Report, percentile

SB = "/api/v1/sandboxes"
STEPS = ("snapshot", "restore", "fork", "template")


def pool_used(data: Path) -> int:
    stats = os.statvfs(data / "disk-pool")
    return (stats.f_blocks - stats.f_bfree) * stats.f_frsize


def _template_ready(http, template_id: str) -> None:
    deadline = time.monotonic() + 120
    while ok(http.get(f"/api/v1/templates/{template_id}"), 200)["status"]["creation"]["state"] == "creating":
        if time.monotonic() > deadline:
            raise TimeoutError(f"template {template_id} not ready within 120 s")
        time.sleep(0.002)


def _round(http, data: Path, source: str, target: str, n: int) -> tuple[dict, dict]:
    """One of each call on ``source``; (seconds, bytes added) per step."""
    took, added = {}, {}

    def step(name, call):
        before, started = pool_used(data), time.perf_counter()
        result = call()
        took[name], added[name] = time.perf_counter() - started, pool_used(data) - before
        return result
    snap = step("snapshot", lambda: ok(http.post(f"{SB}/{source}/snapshots"), 201))["id"]
    step("restore", lambda: ok(http.post(f"{SB}/{target}/rootfs/restore", json={"snapshot_id": snap}), 200))
    child = step("fork", lambda: ok(http.post(f"{SB}/{source}/fork", json={}), 201))["sandbox"]["id"]
    template = f"bench-{source[-6:]}-{n}"

    def from_sandbox():
        ok(http.post("/api/v1/templates/from-sandbox", json={"template_id": template, "sandbox_id": source}), 202)
        _template_ready(http, template)
    step("template", from_sandbox)
    ok(http.delete(f"/api/v1/templates/{template}"), 200)
    ok(http.delete(f"{SB}/{child}"), 202)
    ok(http.delete(f"/api/v1/sandbox-rootfs-snapshots/{snap}"), 200)
    return took, added


def rootfs_copies(work: Path, fill: int, rounds: int) -> Report:
    report = Report(f"rootfs snapshot, restore, fork, template from a sandbox: empty vs {fill // MIB} MiB workspace")
    latency = {(s, v): report.figure(f"{s} p50, {v}", "ms", baseline=(f"{s} p50, empty",) if v != "empty" else (),
                                     higher_is_better=False)
               for s in STEPS for v in ("empty", "full")}
    disk = {(s, v): report.figure(f"{s}: new disk, {v}", "KiB", higher_is_better=False)
            for s in STEPS for v in ("empty", "full")}
    other = [report.figure("fill the workspace (in the sandbox)", "s", higher_is_better=False),
             report.figure("fork child's first 1 MiB write: new disk", "KiB", higher_is_better=False)]
    problem = None if shutil.which("bwrap") and shutil.which("mkfs.xfs") and os.geteuid() == 0 else \
        "needs root, bubblewrap and xfsprogs"
    if problem:
        for figure in report.figures:
            figure.note = problem
        return report
    data = work / "rootfs"
    server = ServerProcess(data, token=TOKEN, runtime="bwrap", extra_args=["--disk-quota", "on"])
    samples = {key: [] for key in latency}
    grown = {key: [] for key in disk}
    try:
        server.start()
        with make_http(server.url) as http:
            http.timeout = 300
            sources = {"empty": claim_sandbox(http), "full": claim_sandbox(http)}
            targets = {v: claim_sandbox(http) for v in sources}
            started = time.perf_counter()
            script = f"head -c {fill} /dev/urandom > /workspace/fill && sync"
            ok(http.post(f"{SB}/{sources['full']}/contexts", json={
                "type": "cmd", "cmd": {"command": ["sh", "-c", script]}, "wait_until_done": True}), 201)
            other[0].runs = [time.perf_counter() - started]
            for target in targets.values():
                ok(http.post(f"{SB}/{target}/pause", json={}), 200)
            for n in range(rounds + 1):
                for variant, source in sources.items():
                    took, added = _round(http, data, source, targets[variant], n)
                    if n == 0:
                        continue  # warm-up
                    for name in STEPS:
                        samples[(name, variant)].append(took[name])
                        grown[(name, variant)].append(added[name])
            # What a fork costs once its child writes: 1 MiB more, and not the source's 1 GiB.
            child = ok(http.post(f"{SB}/{sources['full']}/fork", json={}), 201)["sandbox"]["id"]
            ok(http.post(f"{SB}/{child}/resume", json={}), 200)
            before = pool_used(data)
            ok(http.post(f"{SB}/{child}/contexts", json={"type": "cmd", "cmd": {"command": [
                "sh", "-c", "head -c 1M /dev/urandom > /workspace/new && sync"]}, "wait_until_done": True}), 201)
            other[1].runs = [(pool_used(data) - before) / 1024]
    finally:
        server.stop()
    for key, figure in latency.items():
        figure.runs = [1000 * percentile(samples[key], 50)]
    for key, figure in disk.items():
        figure.runs = [max(0, percentile(grown[key], 50)) / 1024]
    report.notes.append(f"{rounds} rounds after one warm-up, empty and full interleaved; the restore is of that "
                        "round's snapshot into a paused sandbox; disk: the pool's used bytes before and after")
    return report

"""Claim to a session's first output: the ``default`` template against an image template (issue 25).

One hardened server (per-sandbox disks when the host allows them) with the Debian trixie test
image imported; each sample claims a sandbox, creates ``sh -c 'echo ready'`` and polls its journal
until the first ``output`` event, then deletes the sandbox. The two templates alternate, so both
see the same machine load. Also reported: the image's import time and size, and the disk an idle
sandbox of each template takes on the data dir's filesystem (its directory's allocated blocks).
"""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from session_supervisor.infra.images import ImageStore, store_root
from tests.conftest import make_http
from tests.helpers import TOKEN, claim_sandbox, ok, spath
from tests.serverproc import ServerProcess

from .common import Report, percentile

ECHO = {"command": ["sh", "-c", "echo ready"]}


def _allocated(path: Path) -> int:
    """Blocks allocated under ``path``, mounts left out: a sandbox's disk counts as its image file,
    never through its mount point, and an image sandbox's view of the image (lower, merged) not at all."""
    total = 0
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames[:] = [d for d in dirnames if not (dirpath == str(path) and d in ("disk", "lower", "merged"))]
        for name in dirnames + filenames:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
            except OSError:
                pass
    return total


def _first_output(http, template: str, data_dir: Path, idle: list) -> float:
    started = time.perf_counter()
    sandbox = claim_sandbox(http, template)
    sid = ok(http.post(spath(sandbox), json=ECHO), 201)["id"]
    while not any(e["type"] == "output" for e in ok(http.get(spath(sandbox, sid, "/events?after=0")), 200)["events"]):
        if time.perf_counter() - started > 60:
            raise TimeoutError(f"no output from {sandbox} within 60 s")
        time.sleep(0.002)
    elapsed = time.perf_counter() - started
    if not idle:
        idle.append(_allocated(data_dir / "sandboxes" / sandbox))
    ok(http.delete(f"/api/v1/sandboxes/{sandbox}"), 202)
    return elapsed


def image_start(work: Path, samples: int) -> Report:
    report = Report("claim to first output: default vs an image template (bwrap runtime)")
    image_p50 = report.figure("image template p50", "ms", baseline="default p50", higher_is_better=False)
    default_p50 = report.figure("default p50", "ms", baseline="default p50, no disk of its own",
                                higher_is_better=False)
    nodisk_p50 = report.figure("default p50, no disk of its own", "ms", higher_is_better=False)
    extra = [report.figure(n, u, higher_is_better=False) for n, u in (
        ("image template p90", "ms"), ("default p90", "ms"), ("test image import", "s"),
        ("test image, compressed layers", "MiB"), ("test image, unpacked", "MiB"),
        ("idle sandbox on disk, default", "MiB"), ("idle sandbox on disk, image template", "MiB"))]
    from tests.images.fixtures import debian_image, tools_missing
    problem = tools_missing() or (None if shutil.which("bwrap") else "bubblewrap is not installed")
    if problem:
        for figure in (image_p50, default_p50, nodisk_p50, *extra):
            figure.note = problem
        return report
    data = work / "image-start"
    began = time.perf_counter()
    image = ImageStore(store_root(data)).import_archive(debian_image(), "trixie")
    extra[2].runs = [time.perf_counter() - began]
    extra[3].runs = [image.size / 2**20]
    extra[4].runs = [_allocated(image.rootfs) / 2**20]
    server = ServerProcess(data, token=TOKEN, runtime="bwrap")
    plain = ServerProcess(work / "no-disks", token=TOKEN, runtime="bwrap", extra_args=["--disk-quota", "off"])
    times: dict[str, list[float]] = {"default": [], "trixie": [], "no-disk": []}
    idle: dict[str, list] = {"default": [], "trixie": [], "no-disk": []}
    try:
        server.start()
        plain.start()
        with make_http(server.url) as http, make_http(plain.url) as other:
            ok(http.post("/api/v1/templates", json={"template_id": "trixie", "spec": {"mainContainer": {
                "image": image.reference, "resources": {"memory": "2Gi"}}}}), 201)
            variants = {"default": (http, "default", data), "trixie": (http, "trixie", data),
                        "no-disk": (other, "default", plain.data_dir)}
            for client, template, where in variants.values():  # warm-up: page cache, first cgroups
                _first_output(client, template, where, [0])
            for _ in range(samples):
                for name, (client, template, where) in variants.items():
                    times[name].append(_first_output(client, template, where, idle[name]))
    finally:
        server.stop()
        plain.stop()
    nodisk_p50.runs = [1000 * percentile(times["no-disk"], 50)]
    image_p50.runs = [1000 * percentile(times["trixie"], 50)]
    default_p50.runs = [1000 * percentile(times["default"], 50)]
    extra[0].runs = [1000 * percentile(times["trixie"], 90)]
    extra[1].runs = [1000 * percentile(times["default"], 90)]
    extra[5].runs = [idle["default"][0] / 2**20]
    extra[6].runs = [idle["trixie"][0] / 2**20]
    report.notes.append(f"{samples} claims each, interleaved; disks: "
                        f"{'one per sandbox' if (data / 'sandboxes').exists() else 'none'}")
    return report

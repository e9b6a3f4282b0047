"""A sandbox's root filesystem over an image: the image read-only below, its own layer above.

While a sandbox of an image template runs, three directories next to its workspace make its
``/``::

    lower/   the image's rootfs, an idmapped read-only bind (``infra.idmap``): root-owned files
             seen as the sandbox's uid, the image itself never written
    upper/   the sandbox's writable layer (on its own disk when it has one: ``sandbox_disk``)
    merged/  overlayfs of the two, bound at ``/`` by every launch (``launch_chain``)

Why the overlay is mounted here, once per runtime, on the host side and not by bubblewrap's
``--overlay`` per launch: every process of a sandbox (sessions, contexts) must see one and the same
overlay. Two overlay mounts over one upper directory (one per launch) is what the kernel calls
undefined behaviour: each has its own cache of which layer a name lives in, so a file one process
copied up could stay invisible to another. One mount per runtime, made by the server (root) and
bound into each launch's private mount namespace, has none of that; it is unmounted when the
runtime is released (pause, delete, shutdown), so a pause checkpoints ``upper/`` as plain files.
"""
from __future__ import annotations

import logging
import os
import re
import subprocess
from pathlib import Path

from .idmap import idmapped_bind

log = logging.getLogger(__name__)


def rootfs_dir(workspace_dir: str) -> Path:
    """Where a sandbox's layer directories are: next to its workspace."""
    return Path(workspace_dir).parent


def mount_points() -> set[str]:
    """Every mount point of this mount namespace (``os.path.ismount`` misses a bind mount of a
    directory of the same filesystem: same device, and it does not compare with mountinfo)."""
    points = set()
    with open("/proc/self/mountinfo", "rb") as f:
        for line in f:
            field = line.split(b" ")[4]
            points.add(re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m[1], 8)]), field).decode("utf-8", "replace"))
    return points


def _mounted(path: Path) -> bool:
    return str(path) in mount_points()


def mount_rootfs(workspace_dir: str, image_rootfs: Path, uid: int) -> str:
    """Mount (or find mounted) the sandbox's overlay; returns ``merged/``."""
    base = rootfs_dir(workspace_dir)
    lower, upper, work, merged = (base / name for name in ("lower", "upper", "work", "merged"))
    for path in (lower, work, merged):
        path.mkdir(mode=0o700, exist_ok=True)
    if not upper.exists():
        upper.mkdir(mode=0o755)
    if upper.stat().st_uid != uid:  # its root is the sandbox's "/": root inside, so its owner
        os.chown(upper, uid, uid)
        os.chmod(upper, 0o755)
    if _mounted(merged):  # a server restarted after a crash: the runtime before left it mounted
        unmount_rootfs(workspace_dir)
    if not _mounted(lower):
        idmapped_bind(str(image_rootfs), str(lower), uid)
    options = f"lowerdir={lower},upperdir={upper},workdir={work}"
    result = subprocess.run(["mount", "-t", "overlay", "overlay", "-o", options, str(merged)],
                            capture_output=True, text=True, timeout=30, check=False)
    if result.returncode != 0:
        _umount(lower)
        raise OSError(f"overlay mount failed: {result.stderr.strip() or result.returncode}")
    return str(merged)


def unmount_rootfs(workspace_dir: str) -> None:
    base = rootfs_dir(workspace_dir)
    for name in ("merged", "lower"):
        if _mounted(base / name):
            _umount(base / name)


def _umount(path: Path) -> None:
    # Lazy: a process of the runtime still dying may hold it a moment; the mount goes with it.
    result = subprocess.run(["umount", "--lazy", str(path)], capture_output=True, text=True, timeout=30,
                            check=False)
    if result.returncode != 0:
        log.warning("umount %s: %s", path, result.stderr.strip())

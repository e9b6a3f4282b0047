"""Each sandbox's own disk: a sparse ext4 image of ``ephemeral_storage`` bytes, loop-mounted.

Everything a sandbox can write lives on it: ``workspace/``, ``tmp/`` and, for an image template,
its writable layer ``upper/`` (with overlayfs' ``work/``). Past its size a write inside fails with
ENOSPC, and nothing else happens: the journal stores stay in ``state/`` on the data dir's own
filesystem, where the other sandboxes' stores are, so a full sandbox fills only itself.

Why a filesystem image per sandbox and not project quotas on one shared volume: this kernel has
neither XFS quotas (CONFIG_XFS_QUOTA is off: "quota support not available in this kernel") nor the
quota format ext4 needs (CONFIG_QFMT_V2), and btrfs qgroups answer EDQUOT, not ENOSPC, and account
late. A loop-mounted ext4 image works on any kernel with loop devices, bounds the sandbox exactly,
and costs little (measured on 8 GiB: mkfs 21 ms, mount 10 ms, 4.2 MiB allocated when empty; XFS:
mkfs 6 ms, mount 35 ms, 64 MiB allocated for its log). The image is sparse, so the data dir's
filesystem pays only for what was written: the sizes of all sandboxes together may exceed it
(docs/images-and-disks.md says what that means).
"""
from __future__ import annotations

import errno
import logging
import os
import shutil
import subprocess
from pathlib import Path

from .loop_mount import LoopUnsupported, mount_image
from .reflink import thaw

log = logging.getLogger(__name__)

IMAGE_NAME = "disk.img"
MOUNT_NAME = "disk"
_MKFS = ["mkfs.ext4", "-q", "-F", "-m", "0", "-E", "lazy_itable_init=1,lazy_journal_init=1,root_owner=0:0"]


class DiskError(OSError):
    pass


def _run(argv: list[str], what: str) -> None:
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    except FileNotFoundError:
        raise DiskError(f"{argv[0]} is not installed") from None
    if result.returncode != 0:
        detail = (result.stderr.strip() or str(result.returncode)).splitlines()[-1]
        # The data dir's filesystem is full: the claim's answer is 507, as for a store that cannot write.
        code = errno.ENOSPC if "No space left on device" in result.stderr else errno.EIO
        raise DiskError(code, f"{what} failed: {detail}")


def mounted(path: Path) -> bool:
    """A disk is mounted at ``path``: a disk is a filesystem of its own, so its root is on another
    device than the directory holding it. Two stats, where reading the mount table cost a claim
    more with every sandbox (each has a disk and a namespace mounted)."""
    return os.path.ismount(path)


def create_disk(image: Path, point: Path, size: int) -> Path:
    """Make the disk image ``image`` (sparse ext4 of ``size`` bytes) and mount it at ``point``."""
    with open(image, "wb") as f:
        f.truncate(size)
    try:
        _run([*_MKFS, str(image)], "mkfs.ext4")
    except OSError:
        image.unlink(missing_ok=True)
        raise
    mount_disk(image, point)
    shutil.rmtree(point / "lost+found", ignore_errors=True)  # e2fsck makes it again when it needs one
    return point


def mount_disk(image: Path, point: Path) -> Path:
    """Mounted at ``point`` (a disk a killed server left frozen mid-snapshot is thawed)."""
    point.mkdir(mode=0o755, exist_ok=True)
    if mounted(point):
        if thaw(point):
            log.warning("thawed %s: a server stopped while it was frozen for a snapshot", point)
    else:
        try:
            mount_image(str(image), str(point))
        except LoopUnsupported:
            _run(["mount", "-o", "loop,nosuid,nodev,noatime,discard", str(image), str(point)], "mount")
        except OSError as exc:
            raise DiskError(exc.errno or errno.EIO, f"mount failed: {exc}") from exc
    return point


def unmount_disk(point: Path) -> None:
    """Unmount the disk and whatever is mounted below it (an image sandbox's overlay)."""
    from .rootfs import mount_points
    below = sorted((p for p in mount_points() if p == str(point) or p.startswith(f"{point}/")), reverse=True)
    for path in below:
        thaw(Path(path))  # a frozen filesystem would hold its umount until thawed
        result = subprocess.run(["umount", "--lazy", path], capture_output=True, text=True, timeout=60, check=False)
        if result.returncode != 0:
            log.warning("umount %s: %s", path, result.stderr.strip())


def disk_usage(image: Path, point: Path) -> dict[str, int]:
    """The limit is the disk's size (its ephemeral_storage); used is everything not free on it,
    the filesystem's own metadata included (about 10% of a 300 MiB disk, 2% of 8 GiB)."""
    limit = os.stat(image).st_size
    if not mounted(point):  # not mounted (paused, then the server restarted): the image's blocks
        return {"disk_used_bytes": os.stat(image).st_blocks * 512, "disk_limit_bytes": limit}
    stat = os.statvfs(point)
    free = stat.f_bavail * stat.f_frsize
    return {"disk_used_bytes": limit - free, "disk_free_bytes": free, "disk_limit_bytes": limit}


def probe(work_dir: Path) -> str | None:
    """Why per-sandbox disks cannot be used here (None: they can): one tiny disk made and mounted."""
    if os.geteuid() != 0:
        return "the server does not run as root (loop mounts need it)"
    for tool in ("mkfs.ext4", "mount", "umount"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (e2fsprogs, util-linux)"
    trial = Path(work_dir) / "disk-probe"
    shutil.rmtree(trial, ignore_errors=True)
    trial.mkdir(parents=True)
    try:
        create_disk(trial / IMAGE_NAME, trial / MOUNT_NAME, 16 * 2**20)
        return None
    except OSError as exc:
        return str(exc)
    finally:
        unmount_disk(trial / MOUNT_NAME)
        shutil.rmtree(trial, ignore_errors=True)

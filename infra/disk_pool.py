"""The disk pool: one loop-mounted XFS volume under the data dir holding every sandbox's disk image
and every rootfs snapshot, so that a snapshot, a fork and a claim from a snapshot are a reflink of
one image (``FICLONE``): their cost does not grow with what the disk holds, and the copy takes no
new space until one side writes.

Layout: ``<data>/disk-pool.img`` (the volume), mounted at ``<data>/disk-pool/``, which holds
``disks/<sandbox id>.img`` and ``snapshots/<snapshot id>/``. Why XFS on a loop device and not
btrfs, device-mapper thin volumes or plain copies is in docs/snapshots-and-forks.md (measured
here: a reflink of an 8 GiB image holding 1 GiB takes 0.6 ms; a sparse copy 8 s).

What bounds it on the data dir's filesystem:

- its size (``--disk-pool-size``; ``auto``: what the filesystem had free when the pool was made,
  less the server's reserve). The pool never takes more than that from the data dir.
- sparse (the default), it takes only what XFS has written, and it is mounted with ``discard``,
  so blocks XFS frees (a deleted disk or snapshot) are punched out of the image and go back to
  the data dir. Then the pool *can* promise more than the data dir still has: every admission
  (``admit``) counts the smaller of the pool's free space and the data dir's room above the
  server's reserve, and the server warns when the second is the smaller one.
- ``--disk-pool-preallocate`` allocates the whole size up front (``fallocate``, no discard):
  the data dir can then never run out under the pool.

A pool that holds nothing when the server stops is removed (an empty pool costs its 64 MiB log).
"""
from __future__ import annotations

import errno
import fcntl
import logging
import os
import shutil
import subprocess
import time
from pathlib import Path

from session_supervisor.domain.model.errors import InsufficientStorageError

from .disk_reserve import DiskReserve
from .reflink import FICLONE

log = logging.getLogger(__name__)

IMAGE = "disk-pool.img"
MOUNT = "disk-pool"
DISKS, SNAPSHOTS = "disks", "snapshots"
MIN_SIZE = 1 << 30          # XFS needs 300 MiB and a 64 MiB log; below a GiB a pool is no use
ADMIT_ROOM = 64 << 20       # a new disk, snapshot or fork needs this much free in the pool


class PoolError(OSError):
    pass


def _run(argv: list[str], what: str, timeout: float = 120) -> None:
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError:
        raise PoolError(f"{argv[0]} is not installed (xfsprogs, util-linux)") from None
    if result.returncode != 0:
        lines = (result.stderr or result.stdout).strip().splitlines()
        raise PoolError(f"{what} failed: {lines[-1] if lines else result.returncode}")


def mounted(path: Path) -> bool:
    from .rootfs import mount_points
    return str(path) in mount_points()


class DiskPool:
    def __init__(self, data_dir: Path, size: int | None = None, preallocate: bool = False,
                 reserve: DiskReserve | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.image = self.data_dir / IMAGE
        self.root = self.data_dir / MOUNT
        self.size = size              # None: auto
        self.preallocate = preallocate
        self.reserve = reserve
        self._warned_short = False

    @property
    def disks(self) -> Path:
        return self.root / DISKS

    @property
    def snapshots(self) -> Path:
        return self.root / SNAPSHOTS

    # ---- making and mounting ------------------------------------------------------------------
    def open(self) -> str | None:
        """Mount the pool (made first when there is none). Returns why it cannot be used, or None."""
        if os.geteuid() != 0:
            return "the server does not run as root (loop mounts need it)"
        if shutil.which("mkfs.xfs") is None:
            return "mkfs.xfs is not installed (apt-get install xfsprogs)"
        try:
            if not mounted(self.root):
                if not self.image.exists():
                    self._make()
                self._mount()
            for part in (self.disks, self.snapshots):
                part.mkdir(mode=0o700, exist_ok=True)
            os.chmod(self.root, 0o700)
            self._check_reflink()
        except OSError as exc:
            self._unmount()
            return str(exc)
        return None

    def _auto_size(self) -> int:
        stats = os.statvfs(self.data_dir)
        free = stats.f_bavail * stats.f_frsize - (self.reserve.reserve if self.reserve else 0)
        return free // (1 << 30) * (1 << 30)

    def _make(self) -> None:
        size = self.size or self._auto_size()
        if size < MIN_SIZE:
            raise PoolError(f"the disk pool would be {size >> 20} MiB, less than the {MIN_SIZE >> 20} MiB "
                            f"it needs (free space on {self.data_dir}, or --disk-pool-size)")
        temp = self.image.with_name(f".{IMAGE}.{os.getpid()}.tmp")  # a crash leaves no half-made pool
        try:
            with open(temp, "wb") as f:
                if self.preallocate:
                    try:
                        os.posix_fallocate(f.fileno(), 0, size)
                    except OSError as exc:
                        raise PoolError(exc.errno, f"preallocating the {size >> 20} MiB disk pool failed: "
                                                   f"{os.strerror(exc.errno)}") from None
                else:
                    f.truncate(size)
            # -K: no discard at mkfs, which would punch holes in a preallocated image.
            _run(["mkfs.xfs", "-q", "-K", "-m", "reflink=1", str(temp)], "mkfs.xfs")
            os.replace(temp, self.image)
        finally:
            temp.unlink(missing_ok=True)
        log.info("made the disk pool %s: %d MiB%s", self.image, size >> 20, ", preallocated" if self.preallocate else "")

    def _mount(self) -> None:
        self.root.mkdir(mode=0o700, exist_ok=True)
        options = "loop,noatime,nodev,nosuid,noexec" + ("" if self.preallocate else ",discard")
        _run(["mount", "-t", "xfs", "-o", options, str(self.image), str(self.root)], "mounting the disk pool")

    def _check_reflink(self) -> None:
        source, copy = self.root / ".reflink-probe", self.root / ".reflink-probe-copy"
        try:
            source.write_bytes(b"x" * 4096)
            with open(source, "rb") as src, open(copy, "wb") as dst:
                fcntl.ioctl(dst.fileno(), FICLONE, src.fileno())
        except OSError as exc:
            raise PoolError(exc.errno or errno.EIO, f"the disk pool cannot reflink: {exc}") from None
        finally:
            source.unlink(missing_ok=True)
            copy.unlink(missing_ok=True)

    # ---- room -----------------------------------------------------------------------------------
    def usage(self) -> dict[str, int]:
        """The pool's own figures (used counts blocks shared by reflinks once) and the room it has."""
        stats = os.statvfs(self.root)
        size, free = stats.f_blocks * stats.f_frsize, stats.f_bavail * stats.f_frsize
        room = free
        if not self.preallocate and self.reserve is not None:
            room = min(free, self.reserve.tenant_room())  # a sparse pool lives on what the data dir has
        return {"pool_size_bytes": size, "pool_used_bytes": size - stats.f_bfree * stats.f_frsize,
                "pool_free_bytes": free, "pool_room_bytes": room,
                "pool_image_bytes": os.stat(self.image).st_blocks * 512}

    def admit(self, what: str, needed: int = ADMIT_ROOM) -> None:
        """507 unless ``needed`` bytes fit in the pool (and, for a sparse pool, on the data dir)."""
        usage = self.usage()
        if usage["pool_room_bytes"] < usage["pool_free_bytes"] and not self._warned_short:
            self._warned_short = True
            log.warning("the disk pool has %d MiB free but the data dir only %d MiB above the server's reserve: "
                        "the pool can promise more than its filesystem holds (--disk-pool-preallocate prevents it)",
                        usage["pool_free_bytes"] >> 20, usage["pool_room_bytes"] >> 20)
        if usage["pool_room_bytes"] < needed:
            raise InsufficientStorageError(
                f"not enough room in the disk pool for {what}: {usage['pool_room_bytes']} bytes left, "
                f"{needed} needed")

    # ---- the end ----------------------------------------------------------------------------------
    def empty(self) -> bool:
        return not any(self.disks.iterdir()) and not any(self.snapshots.iterdir())

    def close(self) -> None:
        """Server stop (after every sandbox disk was unmounted): unmounted, and removed when empty."""
        if not mounted(self.root):
            return
        try:
            empty = self.empty()
        except OSError:
            empty = False
        self._unmount()
        if empty and not mounted(self.root):
            self.image.unlink(missing_ok=True)

    def _unmount(self) -> None:
        # The loop devices of the disks just unmounted let go of their files a moment later.
        for _ in range(20):
            if not mounted(self.root):
                return
            if subprocess.run(["umount", str(self.root)], capture_output=True, timeout=60).returncode == 0:
                return
            time.sleep(0.05)
        subprocess.run(["umount", "--lazy", str(self.root)], capture_output=True, timeout=60)

"""Volumes on disk: a record and a disk image per volume, and a copy of that disk per snapshot.

::

    <root>/volumes/              root: the data dir, or the shared checkpoint dir with more nodes
      .lock                      flock: every change of a record, on every node
      <volume id>/
        volume.json              the record (domain.model.volumes.Volume), written atomically
        volume.img               its disk: a sparse ext4 image of its size (infra.sandbox_disk)
        snapshots/<snapshot id>/{snapshot.json, volume.img}
      .creating-…                a new volume or snapshot being made; removed at start
      .removing-…                a deleted volume's files, moved aside; removed right after, and at start

Crash safety: a disk is made (or copied) in a ``.creating-`` directory with its record and placed
with one ``rename`` under the lock, so a server killed at any point leaves the volume (or the
snapshot) whole or absent. A delete renames the directory aside under the lock (the commit point:
from then on the volume does not exist) and only then removes its files; what a killed server left
aside is removed by the next start. A restore writes the copy next to the disk and renames it over.

A disk is the sandboxes' format (``infra.sandbox_disk``): sparse ext4, loop-mounted. Copies are
``cp --reflink=auto --sparse=always``: a reflink (no data copied) where the filesystem
has them (XFS, btrfs), else a copy of the allocated blocks only. A mounted source is frozen while it
is copied (the ``freeze`` given by the caller: ``infra.volume_mounts``), so the copy is a consistent
filesystem.
"""
from __future__ import annotations

import dataclasses
import errno
import fcntl
import json
import logging
import os
import re
import subprocess
import uuid
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Callable

from session_supervisor.domain.model.volumes import Binding, Volume, VolumeSnapshot, VolumeSnapshotNotFoundError

from . import loop_mount
from .checkpoint import fsync_dir, write_atomic
from .rootfs import mount_points
from .tree_walk import remove_path

log = logging.getLogger(__name__)

RECORD, SNAPSHOT_RECORD, IMAGE = "volume.json", "snapshot.json", "volume.img"
# The sandboxes' disk format (infra.sandbox_disk): ext4, no blocks reserved for root, lazy init.
MKFS = ["mkfs.ext4", "-q", "-F", "-m", "0", "-E", "lazy_itable_init=1,lazy_journal_init=1,root_owner=0:0"]
CREATING, REMOVING = ".creating-", ".removing-"
_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")  # uuid4, as we make them


def is_volume_id(value: str) -> bool:
    return bool(_ID.match(value))


class VolumeFiles:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o700)  # the disks hold tenants' files
        self.clean_up()

    # ---- layout and records --------------------------------------------------------------------
    def path(self, volume_id: str) -> Path:
        return self.root / volume_id

    def image(self, volume_id: str) -> Path:
        return self.path(volume_id) / IMAGE

    @contextmanager
    def lock(self):
        with open(self.root / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def volumes(self) -> list[Volume]:
        found = []
        for entry in os.scandir(self.root):
            if is_volume_id(entry.name):
                volume = self.volume(entry.name)
                if volume is not None:
                    found.append(volume)
        return found

    def volume(self, volume_id: str) -> Volume | None:
        if not is_volume_id(volume_id):
            return None
        try:
            raw = json.loads((self.path(volume_id) / RECORD).read_text())
        except (FileNotFoundError, NotADirectoryError):
            return None
        raw["bindings"] = [Binding(**b) for b in raw.get("bindings", [])]
        return Volume(**raw)

    def save(self, volume: Volume) -> None:
        write_atomic(self.path(volume.id) / RECORD, _encode(volume))

    def allocated(self, volume_id: str) -> int:
        try:
            return os.stat(self.image(volume_id)).st_blocks * 512
        except FileNotFoundError:
            return 0

    # ---- making and removing volumes -----------------------------------------------------------
    def create(self, volume: Volume, check: Callable[[], None], *, source_volume: str = "",
               source_snapshot: tuple[str, str] | None = None, freeze=None) -> None:
        staging = self._staging(self.root, volume.id)
        try:
            image = staging / IMAGE
            if source_snapshot is not None:
                _copy(self._snapshot_dir(*source_snapshot) / IMAGE, image)
            elif source_volume:
                with (freeze or (lambda _id: nullcontext()))(source_volume):
                    _copy(self.image(source_volume), image)
            else:
                format_disk(image, volume.size_bytes)
            write_atomic(staging / RECORD, _encode(volume))
            (staging / "snapshots").mkdir()
            with self.lock():
                check()
                os.rename(staging, self.path(volume.id))
                fsync_dir(self.root)
        except BaseException:
            remove_path(str(staging))
            raise

    def remove(self, volume_id: str) -> None:
        """Under the lock: moved aside (after this the volume does not exist), then removed."""
        aside = self.root / f"{REMOVING}{volume_id}-{uuid.uuid4().hex[:8]}"
        try:
            os.rename(self.path(volume_id), aside)
        except FileNotFoundError:
            return
        fsync_dir(self.root)
        self._remove_quietly(aside)

    # ---- snapshots -----------------------------------------------------------------------------
    def _snapshot_dir(self, volume_id: str, snapshot_id: str) -> Path:
        if not (is_volume_id(volume_id) and is_volume_id(snapshot_id)):
            raise VolumeSnapshotNotFoundError()
        return self.path(volume_id) / "snapshots" / snapshot_id

    def snapshots(self, volume_id: str) -> list[VolumeSnapshot]:
        if not is_volume_id(volume_id):
            return []
        found = []
        try:
            entries = list(os.scandir(self.path(volume_id) / "snapshots"))
        except (FileNotFoundError, NotADirectoryError):
            return []
        for entry in entries:
            if is_volume_id(entry.name):
                try:
                    found.append(VolumeSnapshot(**json.loads((Path(entry.path) / SNAPSHOT_RECORD).read_text())))
                except (FileNotFoundError, NotADirectoryError):
                    continue
        return found

    def create_snapshot(self, snapshot: VolumeSnapshot, check: Callable[[int], None], freeze) -> VolumeSnapshot:
        parent = self.path(snapshot.volume_id) / "snapshots"
        staging = self._staging(parent, snapshot.id)
        try:
            with freeze(snapshot.volume_id):
                _copy(self.image(snapshot.volume_id), staging / IMAGE)
            snapshot = dataclasses.replace(snapshot, size_bytes=os.stat(staging / IMAGE).st_blocks * 512)
            write_atomic(staging / SNAPSHOT_RECORD, json.dumps(dataclasses.asdict(snapshot)).encode())
            with self.lock():
                check(snapshot.size_bytes)
                os.rename(staging, parent / snapshot.id)  # ENOENT: the volume was deleted meanwhile
                fsync_dir(parent)
            return snapshot
        except BaseException:
            remove_path(str(staging))
            raise

    def remove_snapshot(self, volume_id: str, snapshot_id: str) -> None:
        try:
            path = self._snapshot_dir(volume_id, snapshot_id)
        except VolumeSnapshotNotFoundError:
            return
        aside = self.root / f"{REMOVING}{snapshot_id}-{uuid.uuid4().hex[:8]}"
        try:
            os.rename(path, aside)
        except FileNotFoundError:
            return
        fsync_dir(path.parent)
        self._remove_quietly(aside)

    def restore(self, volume_id: str, snapshot_id: str) -> None:
        """The volume's disk replaced by a copy of the snapshot's (the volume is not mounted)."""
        source = self._snapshot_dir(volume_id, snapshot_id) / IMAGE
        temp = self.path(volume_id) / f"{CREATING}{uuid.uuid4().hex[:8]}.img"
        try:
            _copy(source, temp)
            os.replace(temp, self.image(volume_id))
            fsync_dir(self.path(volume_id))
        except BaseException:
            temp.unlink(missing_ok=True)
            raise

    # ---- crash leftovers -----------------------------------------------------------------------
    def _staging(self, parent: Path, item_id: str) -> Path:
        staging = parent / f"{CREATING}{item_id}-{uuid.uuid4().hex[:8]}"
        staging.mkdir(mode=0o700)
        return staging

    def clean_up(self) -> None:
        """What a killed server left half made or half removed: removed (at start, with no call running).
        A create killed while it emptied its new disk left that disk mounted in its staging dir:
        unmounted first (a mount point cannot be removed, and it holds a loop device)."""
        below = str(self.root) + "/"
        for point in sorted(mount_points(), reverse=True):
            if point.startswith(below) and f"/{CREATING}" in point[len(below) - 1:]:
                subprocess.run(["umount", "--lazy", point], capture_output=True, timeout=60, check=False)
        for entry in os.scandir(self.root):
            if entry.name.startswith((CREATING, REMOVING)):
                self._remove_quietly(Path(entry.path))
            elif is_volume_id(entry.name):
                for inner in (Path(entry.path), Path(entry.path) / "snapshots"):
                    if inner.is_dir():
                        for leftover in inner.iterdir():
                            if leftover.name.startswith(CREATING):
                                self._remove_quietly(leftover)

    def leftovers(self) -> list[str]:
        return sorted(e.name for e in os.scandir(self.root) if e.name.startswith((CREATING, REMOVING)))

    @staticmethod
    def _remove_quietly(path: Path) -> None:
        try:
            remove_path(str(path))
        except OSError as exc:  # the next start tries again
            log.warning("could not remove %s: %s", path, exc)


class VolumeDiskError(OSError):
    """A disk that could not be made, copied or mounted (ENOSPC: the claim's 507)."""


def _tool(argv: list[str], what: str) -> None:
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    except FileNotFoundError:
        raise VolumeDiskError(errno.EIO, f"{argv[0]} is not installed (e2fsprogs, util-linux)") from None
    if result.returncode != 0:
        message = (result.stderr.strip() or str(result.returncode)).splitlines()[-1]
        raise VolumeDiskError(errno.ENOSPC if "No space left" in result.stderr else errno.EIO,
                              f"{what} failed: {message}")


def format_disk(image: Path, size: int) -> None:
    """A sparse, empty ext4 image of ``size`` bytes: only what is written takes space. mkfs makes
    ``lost+found``; debugfs removes it from the image itself (e2fsck makes it again when it needs
    one), with no loop device or mount to set up and tear down."""
    with open(image, "wb") as f:
        f.truncate(size)
    _tool([*MKFS, str(image)], "mkfs.ext4")
    _tool(["debugfs", "-w", "-R", "rmdir lost+found", str(image)], "debugfs")


def mount_image(image: Path, point: Path) -> None:
    """Mounted through a loop device of its own, as the sandboxes' disks are (``infra.loop_mount``)."""
    try:
        loop_mount.mount_image(str(image), str(point), data="")
    except loop_mount.LoopUnsupported:
        _tool(["mount", "-o", "loop,nosuid,nodev,noatime", str(image), str(point)], "mount")


def _encode(volume: Volume) -> bytes:
    return json.dumps(dataclasses.asdict(volume), indent=1, sort_keys=True).encode()


def _copy(source: Path, target: Path) -> None:
    """A reflink where the filesystem has them, else the allocated blocks only (holes stay holes)."""
    result = subprocess.run(["cp", "--reflink=auto", "--sparse=always", str(source), str(target)],
                            capture_output=True, text=True, timeout=3600, check=False)
    if result.returncode != 0:
        target.unlink(missing_ok=True)
        message = result.stderr.strip() or f"cp exited with {result.returncode}"
        raise VolumeDiskError(errno.ENOSPC if "No space left" in message else errno.EIO,
                              f"copying the volume's disk failed: {message}")

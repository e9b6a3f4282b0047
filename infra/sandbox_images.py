"""Where each sandbox's disk image lives, and what is done to whole images: make one (empty, or a
copy of a snapshot's), copy one consistently while it is mounted, swap one for another.

With a disk pool (``infra.disk_pool``) a sandbox's image is ``<pool>/disks/<id>.img``, and every
copy is a reflink; without one (no XFS here, ``--disk-pool-size off``) it is the older
``sandboxes/<id>/disk.img`` and copies are sparse copies. Sandboxes made before the pool keep
their image where it is. The image is mounted at ``sandboxes/<id>/disk`` in both cases.

Crash safety: every image is written under a temporary name (``.tmp-…``) and renamed into place
complete; the start-up sweep (``sweep``) removes temporary images and images of sandboxes that
have no directory (a claim or fork a killed server never finished).

A disk copied from another sandbox holds files owned by that sandbox's host uid: the marker
``NEW_OWNER`` in the sandbox's directory tells the confinement to hand them to a uid of its own
when the runtime first starts (``infra.confinement.sandbox_uid``), so no two sandboxes share a uid.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path

from .disk_pool import DiskPool
from .confinement import NEW_OWNER  # its files came from another sandbox: handed to its own uid
from .reflink import clone_file, frozen, fsync_dir, syncfs, thaw
from .sandbox_disk import IMAGE_NAME, MOUNT_NAME, create_disk, disk_usage, mount_disk, mounted, unmount_disk
from .tree_walk import remove_path

log = logging.getLogger(__name__)

TEMP_PREFIX = ".tmp-"
WARM_PREFIX = ".warm-"  # a warm unit's image in the pool, until a claim renames it to its sandbox's


class SandboxImages:
    def __init__(self, sandboxes_root: Path, pool: DiskPool | None) -> None:
        self.root = sandboxes_root
        self.pool = pool

    def image(self, sandbox_id: str) -> Path | None:
        """The sandbox's disk image, None when it has no disk of its own."""
        if self.pool is not None:
            pooled = self.pool.disks / f"{sandbox_id}.img"
            if pooled.exists():
                return pooled
        legacy = self.root / sandbox_id / IMAGE_NAME
        return legacy if legacy.exists() else None

    def point(self, sandbox_id: str) -> Path:
        return self.root / sandbox_id / MOUNT_NAME

    def _new(self, sandbox_id: str) -> Path:
        if self.pool is not None:
            return self.pool.disks / f"{sandbox_id}.img"
        return self.root / sandbox_id / IMAGE_NAME

    def staging(self, sandbox_id: str) -> Path:
        """A temporary name for an image that will become ``sandbox_id``'s (a fork's capture)."""
        where = self.pool.disks if self.pool is not None else self.root
        return where / f"{TEMP_PREFIX}{sandbox_id}.img"

    # ---- making ---------------------------------------------------------------------------------
    def create(self, sandbox_id: str, size: int, source: Path | None = None, adopt: bool = False) -> Path:
        """Its disk, mounted: empty, a copy of ``source``, or ``source`` itself (``adopt``: a
        temporary image made for it). Returns the mount point."""
        image, point = self._new(sandbox_id), self.point(sandbox_id)
        if source is None:
            temp = image.with_name(TEMP_PREFIX + image.name)
            temp.unlink(missing_ok=True)
            create_disk(temp, point, size)  # mounted under its temporary name: the loop device follows the rename
            os.replace(temp, image)
            return point
        if adopt:
            os.replace(source, image)
        else:
            temp = image.with_name(TEMP_PREFIX + image.name)
            temp.unlink(missing_ok=True)
            clone_file(source, temp)
            os.replace(temp, image)
        fsync_dir(image.parent)
        (self.root / sandbox_id / NEW_OWNER).touch()
        mount_disk(image, point)
        clear_tmp(point)
        return point

    # ---- warm units' disks (infra.warm_pool): made ahead, renamed to their sandbox's --------
    def warm_image(self, unit_dir: Path) -> Path:
        if self.pool is not None:
            return self.pool.disks / f"{WARM_PREFIX}{unit_dir.name}.img"
        return unit_dir / IMAGE_NAME  # moves with the unit's directory

    def create_warm(self, unit_dir: Path, size: int) -> Path:
        """An empty disk mounted at ``unit_dir/disk``; returns the mount point."""
        return create_disk(self.warm_image(unit_dir), unit_dir / MOUNT_NAME, size)

    def adopt_warm(self, unit_dir: Path, sandbox_id: str) -> None:
        """The unit's pooled image becomes the sandbox's (its loop device follows the rename);
        one beside the unit moves with its directory."""
        if self.pool is not None:
            os.replace(self.warm_image(unit_dir), self._new(sandbox_id))

    def destroy_warm(self, unit_dir: Path) -> None:
        unmount_disk(unit_dir / MOUNT_NAME)
        self.warm_image(unit_dir).unlink(missing_ok=True)

    def sweep_warm(self, warm_root: Path) -> int:
        """Start-up: every warm unit a killed server left (mounted or not) and its image."""
        removed = 0
        for entry in os.scandir(warm_root):
            if entry.is_dir(follow_symlinks=False):
                self.destroy_warm(Path(entry.path))
                remove_path(entry.path)
                removed += 1
        if self.pool is not None:
            for entry in os.scandir(self.pool.disks):
                if entry.name.startswith(WARM_PREFIX) and entry.name.endswith(".img"):
                    os.unlink(entry.path)
        return removed

    def mount(self, sandbox_id: str) -> None:
        image = self.image(sandbox_id)
        if image is not None:
            mount_disk(image, self.point(sandbox_id))

    # ---- copies of a disk in use --------------------------------------------------------------
    def sync(self, sandbox_id: str) -> None:
        """Write back its dirty data while it still runs, so the freeze after has little to do."""
        point = self.point(sandbox_id)
        if self.image(sandbox_id) is not None and mounted(point):
            syncfs(point)

    def capture(self, sandbox_id: str, target: Path) -> bool:
        """``target`` (a new file) made a consistent copy of the sandbox's disk: its filesystem is
        frozen while the image is copied. True when the copy is a reflink."""
        image, point = self.image(sandbox_id), self.point(sandbox_id)
        if image is None:
            raise FileNotFoundError(f"sandbox {sandbox_id} has no disk of its own")
        if not mounted(point):
            return clone_file(image, target)
        with frozen(point):
            return clone_file(image, target)

    def replace(self, sandbox_id: str, source: Path, foreign: bool) -> None:
        """Its disk becomes a copy of ``source`` (a restore; the sandbox is paused). The swap is one
        rename: a crash leaves the old disk or the new one, never a mix."""
        image, point = self.image(sandbox_id), self.point(sandbox_id)
        if image is None:
            raise FileNotFoundError(f"sandbox {sandbox_id} has no disk of its own")
        temp = image.with_name(TEMP_PREFIX + image.name)
        temp.unlink(missing_ok=True)
        clone_file(source, temp)
        unmount_disk(point)
        if foreign:
            (self.root / sandbox_id / NEW_OWNER).touch()
        os.replace(temp, image)
        fsync_dir(image.parent)
        mount_disk(image, point)
        clear_tmp(point)

    # ---- the rest -------------------------------------------------------------------------------
    def usage(self, sandbox_id: str) -> dict[str, int]:
        image = self.image(sandbox_id)
        return disk_usage(image, self.point(sandbox_id)) if image is not None else {}

    def allocated(self, sandbox_id: str) -> int:
        image = self.image(sandbox_id)
        return os.stat(image).st_blocks * 512 if image is not None else 0

    def remove(self, sandbox_id: str) -> None:
        """Unmounted, and its pooled image deleted (a legacy one goes with the sandbox's directory)."""
        unmount_disk(self.point(sandbox_id))
        if self.pool is not None:
            for path in (self.pool.disks / f"{sandbox_id}.img", self.staging(sandbox_id),
                         self.pool.disks / f"{TEMP_PREFIX}{sandbox_id}.img"):
                path.unlink(missing_ok=True)

    def sweep(self) -> int:
        """Start-up: temporary images, and pooled images of sandboxes with no directory, removed."""
        removed = 0
        places = [self.root] + ([self.pool.disks] if self.pool is not None else [])
        for place in places:
            for entry in os.scandir(place):
                name = entry.name
                doomed = name.startswith(TEMP_PREFIX) and name.endswith(".img")
                if place != self.root and not doomed and name.endswith(".img"):
                    doomed = not (self.root / name[:-len(".img")]).is_dir()
                if doomed:
                    os.unlink(entry.path)
                    removed += 1
        for entry in os.scandir(self.root):
            if not entry.is_dir(follow_symlinks=False) or entry.name.startswith("."):
                continue
            temp = Path(entry.path) / (TEMP_PREFIX + IMAGE_NAME)
            if temp.exists():  # a restore killed before its rename
                temp.unlink()
                removed += 1
            point = Path(entry.path) / MOUNT_NAME
            if mounted(point) and thaw(point):  # a snapshot killed while its disk was frozen
                log.warning("thawed %s: a server stopped while it was frozen for a snapshot", point)
        return removed

    def close(self) -> None:
        """Server stop: every disk unmounted (the next start mounts what it runs)."""
        for entry in self.root.iterdir():
            if entry.name.startswith(".") or not entry.is_dir():
                continue
            if self.image(entry.name) is not None or (entry / MOUNT_NAME).is_dir():
                unmount_disk(entry / MOUNT_NAME)


def clear_tmp(point: Path) -> None:
    """A disk copied from a snapshot starts with an empty /tmp: /tmp is not part of a snapshot."""
    tmp = point / "tmp"
    if not tmp.is_dir() or tmp.is_symlink():
        return
    for entry in os.scandir(tmp):
        try:
            remove_path(entry.path)
        except OSError as exc:
            log.warning("clearing %s: %s", entry.path, exc)

"""This node's mounts of volume disks: ``<data dir>/volume-mounts/<volume id>``.

A volume's disk is loop-mounted once per node (``nosuid,nodev,noatime``), however many users it
has: the file API's calls and watches, and the sandboxes that bind it (``infra.volume_binding``
binds this mount into them). Users are counted; a disk nobody uses is unmounted after ``idle_s``
(a mounted disk holds a loop device). A snapshot or fork of a mounted volume freezes it
(``fsfreeze``) for the copy: writes inside wait, and the copy is a consistent filesystem.

After a kill -9 the mounts are still there: the next start thaws whatever was frozen, unmounts the
disks of volumes that no longer exist, and adopts the rest (with no users: the idle sweep unmounts
them unless a sandbox binds them again).

With more than one node (``node_id`` set) the disks are in the shared checkpoint dir, and an ext4
filesystem mounted by two nodes at once is corrupted. So a node mounts a disk only while it uses it
(no idle time), and says so in ``volumes/<id>/mounted-on`` (its node id, written and removed under
the store's lock): another node's mount waits a little for it to go (a sandbox just deleted
there), then is refused (409), and so are its snapshots, forks and restores, which would copy or
replace a disk that node is writing. A node that died holding a disk holds it until it starts again.
"""
from __future__ import annotations

import logging
import os
import subprocess
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from session_supervisor.domain.model.volumes import VolumeConflictError, VolumeNotFoundError

from .sandbox_disk import mounted
from .volume_store import VolumeFiles, is_volume_id, mount_image

log = logging.getLogger(__name__)

IDLE_S = 30.0
HOLDER = "mounted-on"
HANDOVER_S = 10.0  # how long a mount waits for another node to let the disk go


class VolumeMounts:
    def __init__(self, store: VolumeFiles, root: Path, idle_s: float = IDLE_S, node_id: str = "") -> None:
        self.store = store
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o700)  # nobody but the server walks into a tenant's disk
        self.node_id = node_id
        self.idle_s = 0.0 if node_id else idle_s
        self._lock = threading.Lock()
        self._users: dict[str, int] = {}
        self._idle_since: dict[str, float] = {}
        self._stop = threading.Event()
        self._sweeper: threading.Thread | None = None
        self.recover()

    def point(self, volume_id: str) -> Path:
        return self.root / volume_id

    def attach(self, volume_id: str) -> str:
        """Mounted here (one more user); the host path of the volume's root."""
        with self._lock:
            point = self.point(volume_id)
            if not mounted(point):
                image = self.store.image(volume_id)
                if not is_volume_id(volume_id) or not image.exists():
                    raise VolumeNotFoundError()
                self._hold(volume_id)
                point.mkdir(mode=0o755, exist_ok=True)
                try:
                    mount_image(image, point)
                except BaseException:
                    self._let_go(volume_id)
                    raise
            self._users[volume_id] = self._users.get(volume_id, 0) + 1
            self._idle_since.pop(volume_id, None)
        self._start_sweeper()
        return str(point)

    def detach(self, volume_id: str) -> None:
        with self._lock:
            left = self._users.get(volume_id, 0) - 1
            if left > 0:
                self._users[volume_id] = left
                return
            self._users.pop(volume_id, None)
            if self.node_id:  # the disk goes at once: another node may be waiting for it
                self._unmount(volume_id, lazy=False)
            else:
                self._idle_since[volume_id] = time.monotonic()

    def users(self, volume_id: str) -> int:
        with self._lock:
            return self._users.get(volume_id, 0)

    @contextmanager
    def frozen(self, volume_id: str):
        """Writes to the volume held while the block runs (its disk is being copied)."""
        point = self.point(volume_id)
        if not mounted(point):
            self.check_not_held_elsewhere(volume_id)
            yield
            return
        _run(["fsfreeze", "--freeze", str(point)])
        try:
            yield
        finally:
            _run(["fsfreeze", "--unfreeze", str(point)])

    def release(self, volume_id: str) -> None:
        """Unmounted here: its disk is about to be deleted or replaced. Lazily: a sandbox that still
        binds it (a delete with force) keeps it until its runtime ends."""
        self.check_not_held_elsewhere(volume_id)
        with self._lock:
            self._users.pop(volume_id, None)
            self._idle_since.pop(volume_id, None)
            self._unmount(volume_id, lazy=True)

    def _unmount(self, volume_id: str, lazy: bool) -> bool:
        point = self.point(volume_id)
        if mounted(point):
            result = subprocess.run(["umount", *(["--lazy"] if lazy else []), str(point)],
                                    capture_output=True, text=True, timeout=60, check=False)
            if result.returncode != 0:
                log.info("umount %s: %s", point, result.stderr.strip())
                return False
            self._let_go(volume_id)
        try:
            point.rmdir()
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("volume mount point %s: %s", point, exc)
        return True

    # ---- one node at a time (a cluster) -------------------------------------------------------
    def _holder_file(self, volume_id: str) -> Path:
        return self.store.path(volume_id) / HOLDER

    def holder(self, volume_id: str) -> str | None:
        try:
            return self._holder_file(volume_id).read_text().strip() or None
        except (FileNotFoundError, NotADirectoryError):
            return None

    def check_not_held_elsewhere(self, volume_id: str) -> None:
        holder = self.holder(volume_id) if self.node_id else None
        if holder and holder != self.node_id:
            raise VolumeConflictError(f"sandboxvolume {volume_id} is mounted on node {holder}: "
                                      "it must be unmounted there first (delete or pause what binds it)")

    def _hold(self, volume_id: str) -> None:
        if not self.node_id:
            return
        deadline = time.monotonic() + HANDOVER_S
        while True:
            with self.store.lock():
                holder = self.holder(volume_id)
                if holder in (None, self.node_id):
                    self._holder_file(volume_id).write_text(self.node_id)
                    return
            if time.monotonic() >= deadline:
                self.check_not_held_elsewhere(volume_id)
            time.sleep(0.1)

    def _let_go(self, volume_id: str) -> None:
        if not self.node_id:
            return
        with self.store.lock():
            if self.holder(volume_id) == self.node_id:
                self._holder_file(volume_id).unlink(missing_ok=True)

    # ---- the idle sweep and crash leftovers ----------------------------------------------------
    def sweep(self) -> None:
        now = time.monotonic()
        with self._lock:
            for volume_id, since in list(self._idle_since.items()):
                if now - since >= self.idle_s and self._unmount(volume_id, lazy=False):
                    del self._idle_since[volume_id]

    def _start_sweeper(self) -> None:
        with self._lock:
            if self._sweeper is not None:
                return
            self._sweeper = threading.Thread(target=self._sweep_forever, name="volume-unmount", daemon=True)
            self._sweeper.start()

    def _sweep_forever(self) -> None:
        while not self._stop.wait(max(0.5, self.idle_s / 3)):
            try:
                self.sweep()
            except Exception:
                log.exception("volume idle sweep failed")

    def recover(self) -> None:
        for entry in os.scandir(self.root):
            point = Path(entry.path)
            if not mounted(point):
                if entry.is_dir(follow_symlinks=False) and not any(point.iterdir()):
                    point.rmdir()
                continue
            subprocess.run(["fsfreeze", "--unfreeze", str(point)], capture_output=True, timeout=60, check=False)
            if self.store.volume(entry.name) is None:
                self._unmount(entry.name, lazy=True)
            else:
                self._idle_since[entry.name] = time.monotonic()
        if self.node_id:  # what this node held when it died, and no longer has mounted
            for volume in self.store.volumes():
                if self.holder(volume.id) == self.node_id and not mounted(self.point(volume.id)):
                    self._let_go(volume.id)
        if self._idle_since:
            self._start_sweeper()

    def close(self) -> None:
        """Server stop: every disk unmounted (the sandboxes' runtimes are released already)."""
        self._stop.set()
        with self._lock:
            for entry in os.scandir(self.root):
                self._unmount(entry.name, lazy=True)
            self._users.clear()
            self._idle_since.clear()


def _run(argv: list[str]) -> None:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    if result.returncode != 0:
        raise OSError(f"{' '.join(argv[:2])} failed: {result.stderr.strip() or result.returncode}")

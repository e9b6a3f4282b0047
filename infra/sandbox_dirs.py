"""Sandbox directories on disk: ``<data>/sandboxes/<id>/{workspace,tmp,state}``.

The sandbox directory is its "rootfs": ``workspace/`` is what its processes see at
/workspace, ``tmp/`` their /tmp under bwrap, ``state/`` holds its store and checkpoint
manifest and is never visible to them. With per-sandbox disks (``infra.sandbox_disk``) what the
sandbox writes moves onto its own disk, mounted at ``disk/``: ``disk/{workspace,tmp,upper,work}``;
``state/`` stays on the data dir's filesystem, so a full sandbox never stops a store.

Modes: ``sandboxes/`` and each sandbox's directory are 0700 and the server's, so no other
local user reaches a workspace or a /tmp through them; ``workspace/`` and ``tmp/`` are handed
to the sandbox's own uid when its runtime is isolated (``infra.confinement``) and are never
world-writable. The sandbox's processes do not need to traverse these directories: the launch
chain binds the workspace and /tmp onto a staging point as root before it drops to the
sandbox's uid (``infra.launch_chain``).

What a tenant made in its workspace is removed without recursion (``infra.tree_walk``). A
removal that still fails (an I/O error, a tree that kept changing) moves the directory aside
to ``sandboxes/.removing-…``, so the id is free at once, and a background thread retries it
until it is gone; a server started later picks up what is left there.
"""
from __future__ import annotations

import logging
import os
import secrets
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .confinement import chown_tree, own_tmp
from .disk_reserve import CLAIM_ROOM, DiskReserve
from .disk_pool import DiskPool
from .sandbox_disk import MOUNT_NAME
from .sandbox_images import SandboxImages
from .tree_walk import remove_path, tree_usage
from .uids import UidTable
from .warm_stock import WarmStock

log = logging.getLogger(__name__)
DEFAULT_DISK_BYTES = 8 * 2**30

PRIVATE = 0o700
REMOVING_PREFIX = ".removing-"
RETRY_EVERY_S = 5.0
WARM_DIR = "warm"  # <data>/warm/<unit>: a sandbox directory made ahead (infra.warm_pool)


@dataclass(frozen=True)
class WarmDirectory:
    """A sandbox directory made ahead: its disk mounted, workspace/ and tmp/ owned by ``uid``,
    state/ with an empty journal. A claim renames it to ``sandboxes/<id>``."""

    path: Path
    uid: int | None
    launch_ns: int | None = None  # its launch namespace, open (infra.launch_namespace)


class SandboxDirectories:
    def __init__(self, data_dir: Path, reserve: DiskReserve | None = None, disks: bool = False,
                 quota_note: str = "", pool: DiskPool | None = None) -> None:
        self.reserve = reserve  # the server's own room on the filesystem: claims stop above it
        self.disks = disks  # a disk of its own per new sandbox (its ephemeral_storage)
        self.quota_note = quota_note  # why there are none, when there are none
        self.root = data_dir / "sandboxes"
        self.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, PRIVATE)
        self.pool = pool  # where new disks go, so that snapshots and forks are reflinks
        self.images = SandboxImages(self.root, pool)  # where each disk is; whole-image copies
        self.warm_root = data_dir / WARM_DIR
        self.warm_root.mkdir(mode=PRIVATE, exist_ok=True)
        os.chmod(self.warm_root, PRIVATE)
        swept = self.images.sweep_warm(self.warm_root)
        if swept:
            log.info("removed %d warm sandbox director%s left by an earlier server", swept,
                     "y" if swept == 1 else "ies")
        self.warm: WarmStock | None = None  # directories made ahead; None: none kept
        self.uids: UidTable | None = None  # set when sandboxes get uids of their own (as root)
        # The journal's empty file, made ahead in a warm directory's state/ (SQLite stores only).
        self.prefill_state: Callable[[Path], None] | None = None
        # A warm directory's launch namespace (infra.launch_namespace), made from its workspace path;
        # a claimed one waits here until its runtime's first launch takes it.
        self.make_launch_ns: Callable[[str], int] | None = None
        self._launch_ns: dict[str, int] = {}
        swept = self.images.sweep()
        if swept:
            log.info("removed %d disk image(s) a killed server left half-made", swept)
        self._pending: set[Path] = set()
        for path in self.root.iterdir():
            if path.name.startswith(REMOVING_PREFIX):
                self._pending.add(path)
            elif path.is_dir() and not path.is_symlink():
                self.secure(path.name)
        self._lock = threading.Lock()
        self._walks: dict[str, list] = {}  # sandbox id -> [lock of its usage walk, last figure]
        self._wake = threading.Event()
        self._retrier: threading.Thread | None = None
        if self._pending:
            self._start_retrier()

    def admit(self) -> None:
        """507 when a new sandbox would have to live in the server's disk reserve."""
        if self.reserve is not None:
            self.reserve.admit(CLAIM_ROOM, "a new sandbox")

    def path(self, sandbox_id: str) -> Path:
        return self.root / sandbox_id

    def rootfs_path(self, sandbox_id: str) -> Path:
        """Where its workspace, /tmp and writable layer are: on its disk when it has one."""
        path = self.path(sandbox_id)
        return path / MOUNT_NAME if self.images.image(sandbox_id) is not None else path

    def workspace(self, sandbox_id: str) -> str:
        return str(self.rootfs_path(sandbox_id) / "workspace")

    def state_dir(self, sandbox_id: str) -> Path:
        return self.path(sandbox_id) / "state"

    def create(self, sandbox_id: str, rootfs: dict | None = None, source: Path | None = None,
               adopt: bool = False) -> None:
        """Its directories and disk; ``source``: a disk image the new disk is a copy of (a snapshot),
        or becomes (``adopt``: a fork's capture, made for it). An empty one comes from the warm
        stock when it has one of the size asked for."""
        if source is None and self.warm is not None:
            got = self.warm.take(self.warm_shape(rootfs))
            if got is not None and self._adopt_warm(got[0], sandbox_id):
                return
        self.path(sandbox_id).mkdir(mode=PRIVATE)
        self.state_dir(sandbox_id).mkdir(mode=PRIVATE)
        base = self.path(sandbox_id)
        if self.disks:
            size = _aligned((rootfs or {}).get("disk_bytes") or DEFAULT_DISK_BYTES)
            base = self.images.create(sandbox_id, size, source, adopt)
        make_parts(base)
        self.secure(sandbox_id)

    # ---- warm directories (infra.warm_pool) ------------------------------------------------
    def warm_shape(self, rootfs: dict | None) -> int:
        """What a warm directory must match: its disk's size (0: no disks here)."""
        return _aligned((rootfs or {}).get("disk_bytes") or DEFAULT_DISK_BYTES) if self.disks else 0

    def make_warm(self, disk_bytes: int) -> WarmDirectory:
        unit = self.warm_root / secrets.token_hex(8)
        unit.mkdir(mode=PRIVATE)
        uid = namespace = None
        try:
            (unit / "state").mkdir(mode=PRIVATE)
            base = self.images.create_warm(unit, disk_bytes) if disk_bytes else unit
            make_parts(base)
            if self.uids is not None:
                uid = self.uids.allot(unit.name)
                chown_tree(base / "workspace", uid)
                own_tmp(base / "workspace", uid)
            if self.prefill_state is not None:
                self.prefill_state(unit / "state")
            if self.make_launch_ns is not None:
                namespace = self.make_launch_ns(str(base / "workspace"))
        except BaseException:
            self.destroy_warm(WarmDirectory(unit, uid, namespace))
            raise
        return WarmDirectory(unit, uid, namespace)

    def destroy_warm(self, unit: WarmDirectory) -> None:
        if unit.launch_ns is not None:
            os.close(unit.launch_ns)
        self.images.destroy_warm(unit.path)
        remove_path(str(unit.path))
        if self.uids is not None:
            self.uids.release(unit.uid, unit.path.name)

    def _adopt_warm(self, unit: WarmDirectory, sandbox_id: str) -> bool:
        """The warm directory (and its pooled image) renamed to the sandbox's. A rename the
        filesystem refuses (the sandboxes dir on another mount) loses the unit, not the claim."""
        try:
            self.images.adopt_warm(unit.path, sandbox_id)
            os.rename(unit.path, self.path(sandbox_id))
        except OSError as exc:
            log.warning("a warm sandbox directory could not be taken over (%s); making one", exc)
            self.images.remove(sandbox_id)
            self.destroy_warm(unit)
            return False
        if self.uids is not None and unit.uid is not None:
            self.uids.hand_over(unit.uid, unit.path.name, sandbox_id)
        if unit.launch_ns is not None:
            self._launch_ns[sandbox_id] = unit.launch_ns
        return True

    def take_launch_ns(self, sandbox_id: str) -> int | None:
        """The launch namespace made with the sandbox's warm directory, once (then it is the
        runtime's, which closes it)."""
        return self._launch_ns.pop(sandbox_id, None)

    def prepare(self, sandbox_id: str, rootfs: dict | None) -> None:
        """Its disk mounted (a paused sandbox's after a server restart, or a resumed one's)."""
        self.images.mount(sandbox_id)

    # ---- whole disks: snapshots, forks, restores (infra.sandbox_images) -----------------------
    def snapshots_unavailable(self) -> str | None:
        """Why rootfs snapshots cannot be taken here (None: they can)."""
        return None if self.disks else f"rootfs snapshots need a disk per sandbox: {self.quota_note}"

    def admit_copy(self, what: str) -> None:
        """507 when a new disk or snapshot would not fit: in the pool, or above the server's reserve."""
        if self.pool is not None:
            self.pool.admit(what)
        elif self.reserve is not None:
            self.reserve.admit(CLAIM_ROOM, what)

    def staging(self, sandbox_id: str) -> Path:
        return self.images.staging(sandbox_id)

    def discard(self, image: Path) -> None:
        Path(image).unlink(missing_ok=True)

    def sync(self, sandbox_id: str) -> None:
        self.images.sync(sandbox_id)

    def capture(self, sandbox_id: str, target: Path) -> bool:
        return self.images.capture(sandbox_id, target)

    def replace_disk(self, sandbox_id: str, source: Path, foreign: bool) -> None:
        self.images.replace(sandbox_id, source, foreign)

    def disk_allocated(self, sandbox_id: str) -> int:
        return self.images.allocated(sandbox_id)

    def secure(self, sandbox_id: str) -> None:
        """The server's modes on the sandbox's own directories (older data dirs had 0755 and a
        root-owned 1777 /tmp); the uid that owns workspace/ and tmp/ is set by the isolation."""
        base, parts = self.path(sandbox_id), self.rootfs_path(sandbox_id)
        for path in (base, parts / "tmp", base / "state"):  # none is visible inside a sandbox
            if path.is_dir() and not path.is_symlink():
                os.chmod(path, PRIVATE)

    def list_ids(self) -> list[str]:
        """Every sandbox directory there is, whether or not its claim ever completed (not those of
        deleted sandboxes still being removed: ``.removing-…``, retried by this class)."""
        return sorted(entry.name for entry in os.scandir(self.root)
                      if entry.is_dir(follow_symlinks=False) and not entry.name.startswith("."))

    def usage(self, sandbox_id: str) -> dict[str, int]:
        """Disk the workspace takes (allocated blocks, links not followed): no quota, a report.
        One walk per sandbox at a time: while one runs, other calls get the last figure at once
        instead of each taking a thread to walk the same (maybe huge) tree."""
        with self._lock:
            walk = self._walks.setdefault(sandbox_id, [threading.Lock(), None])
        if not walk[0].acquire(blocking=walk[1] is None):
            return {"workspace_bytes": walk[1], **self._disk_usage(sandbox_id)}
        try:
            try:
                walk[1] = tree_usage(self.workspace(sandbox_id))
            except FileNotFoundError:
                walk[1] = 0
            return {"workspace_bytes": walk[1], **self._disk_usage(sandbox_id)}
        finally:
            walk[0].release()

    def _disk_usage(self, sandbox_id: str) -> dict[str, int]:
        """With a disk of its own: what the whole disk holds against its limit."""
        return self.images.usage(sandbox_id)

    # ---- removal --------------------------------------------------------------------------
    def remove(self, sandbox_id: str) -> None:
        with self._lock:
            self._walks.pop(sandbox_id, None)
        untaken = self._launch_ns.pop(sandbox_id, None)
        if untaken is not None:  # its runtime never launched anything
            os.close(untaken)
        path = self.path(sandbox_id)
        if self.uids is not None:
            try:
                self.uids.release(os.stat(self.workspace(sandbox_id)).st_uid, sandbox_id)
            except OSError:
                pass
        self.images.remove(sandbox_id)  # its disk first: the removal must not walk into a mounted filesystem
        try:
            remove_path(str(path))
            return
        except OSError as exc:
            log.warning("sandbox %s: its directory could not be removed (%s); retrying in the background",
                        sandbox_id, exc)
        aside = self.root / f"{REMOVING_PREFIX}{sandbox_id}-{uuid.uuid4().hex[:8]}"
        try:
            os.rename(path, aside)
        except FileNotFoundError:
            return
        except OSError as exc:
            log.warning("sandbox %s: could not move its directory aside either: %s", sandbox_id, exc)
            aside = path
        with self._lock:
            self._pending.add(aside)
        self._start_retrier()

    def _start_retrier(self) -> None:
        with self._lock:
            if self._retrier is not None:
                self._wake.set()
                return
            self._retrier = threading.Thread(target=self._retry_forever, name="sandbox-dir-removal", daemon=True)
            self._retrier.start()

    def _retry_forever(self) -> None:
        while True:
            with self._lock:
                pending = sorted(self._pending)
                if not pending:
                    self._retrier = None
                    return
            for path in pending:
                try:
                    remove_path(str(path))
                except OSError as exc:
                    log.warning("removing %s failed again: %s", path, exc)
                    continue
                log.info("removed %s", path)
                with self._lock:
                    self._pending.discard(path)
            self._wake.wait(RETRY_EVERY_S)
            self._wake.clear()

    def close(self) -> None:
        """Server stop: every sandbox's disk unmounted (the next start mounts what it runs), then the pool."""
        self.images.close()
        if self.pool is not None:
            self.pool.close()


def make_parts(base: Path) -> None:
    """workspace/ and tmp/ (the sandbox's /tmp under bwrap); the isolation hands both to its uid."""
    (base / "workspace").mkdir(exist_ok=True)
    (base / "tmp").mkdir(mode=PRIVATE, exist_ok=True)


def _aligned(size: int) -> int:
    return max(4096, int(size) // 4096 * 4096)

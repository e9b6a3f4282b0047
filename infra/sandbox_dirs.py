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
import threading
import uuid
from pathlib import Path

from .disk_reserve import CLAIM_ROOM, DiskReserve
from .sandbox_disk import IMAGE_NAME, MOUNT_NAME, create_disk, disk_usage, mount_disk, unmount_disk
from .tree_walk import remove_path, tree_usage

log = logging.getLogger(__name__)
DEFAULT_DISK_BYTES = 8 * 2**30

PRIVATE = 0o700
REMOVING_PREFIX = ".removing-"
RETRY_EVERY_S = 5.0


class SandboxDirectories:
    def __init__(self, data_dir: Path, reserve: DiskReserve | None = None, disks: bool = False,
                 quota_note: str = "") -> None:
        self.reserve = reserve  # the server's own room on the filesystem: claims stop above it
        self.disks = disks  # a disk of its own per new sandbox (its ephemeral_storage)
        self.quota_note = quota_note  # why there are none, when there are none
        self.root = data_dir / "sandboxes"
        self.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, PRIVATE)
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
        return path / MOUNT_NAME if (path / IMAGE_NAME).exists() else path

    def workspace(self, sandbox_id: str) -> str:
        return str(self.rootfs_path(sandbox_id) / "workspace")

    def state_dir(self, sandbox_id: str) -> Path:
        return self.path(sandbox_id) / "state"

    def create(self, sandbox_id: str, rootfs: dict | None = None) -> None:
        self.path(sandbox_id).mkdir(mode=PRIVATE)
        self.state_dir(sandbox_id).mkdir(mode=PRIVATE)
        base = self.path(sandbox_id)
        if self.disks:
            base = create_disk(base, _aligned((rootfs or {}).get("disk_bytes") or DEFAULT_DISK_BYTES))
        make_parts(base)
        self.secure(sandbox_id)

    def prepare(self, sandbox_id: str, rootfs: dict | None) -> None:
        """Its disk mounted (a paused sandbox's after a server restart, or a resumed one's)."""
        if (self.path(sandbox_id) / IMAGE_NAME).exists():
            mount_disk(self.path(sandbox_id))

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
        path = self.path(sandbox_id)
        return disk_usage(path) if (path / IMAGE_NAME).exists() else {}

    # ---- removal --------------------------------------------------------------------------
    def remove(self, sandbox_id: str) -> None:
        with self._lock:
            self._walks.pop(sandbox_id, None)
        path = self.path(sandbox_id)
        unmount_disk(path)  # its disk first: the removal must not walk into a mounted filesystem
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
        """Server stop: every sandbox's disk unmounted (the next start mounts what it runs)."""
        for entry in self.root.iterdir():
            if (entry / IMAGE_NAME).exists():
                unmount_disk(entry)


def make_parts(base: Path) -> None:
    """workspace/ and tmp/ (the sandbox's /tmp under bwrap); the isolation hands both to its uid."""
    (base / "workspace").mkdir(exist_ok=True)
    (base / "tmp").mkdir(mode=PRIVATE, exist_ok=True)


def _aligned(size: int) -> int:
    return max(4096, int(size) // 4096 * 4096)

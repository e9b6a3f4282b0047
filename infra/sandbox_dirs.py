"""Sandbox directories on disk: ``<data>/sandboxes/<id>/{workspace,tmp,state}``.

The sandbox directory is its "rootfs": ``workspace/`` is what its processes see at
/workspace, ``tmp/`` their /tmp under bwrap, ``state/`` holds its store and checkpoint
manifest and is never visible to them. With per-sandbox disks (``infra.sandbox_disk``) what the
sandbox writes moves onto its own disk, mounted at ``disk/``: ``disk/{workspace,tmp,upper,work}``;
``state/`` stays on the data dir's filesystem, so a full sandbox never stops a store.
"""
from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from .sandbox_disk import IMAGE_NAME, MOUNT_NAME, create_disk, disk_usage, mount_disk, unmount_disk

log = logging.getLogger(__name__)
DEFAULT_DISK_BYTES = 8 * 2**30


class SandboxDirectories:
    def __init__(self, data_dir: Path, disks: bool = False, quota_note: str = "") -> None:
        self.root = data_dir / "sandboxes"
        self.root.mkdir(parents=True, exist_ok=True)
        self.disks = disks  # a disk of its own per new sandbox (its ephemeral_storage)
        self.quota_note = quota_note  # why there are none, when there are none

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
        path = self.path(sandbox_id)
        path.mkdir(parents=True)
        self.state_dir(sandbox_id).mkdir(mode=0o700)
        base = path
        if self.disks:
            base = create_disk(path, _aligned((rootfs or {}).get("disk_bytes") or DEFAULT_DISK_BYTES))
        make_parts(base)

    def prepare(self, sandbox_id: str, rootfs: dict | None) -> None:
        """Its disk mounted (a paused sandbox's after a server restart, or a resumed one's)."""
        if (self.path(sandbox_id) / IMAGE_NAME).exists():
            mount_disk(self.path(sandbox_id))

    def list_ids(self) -> list[str]:
        """Every sandbox directory there is, whether or not its claim ever completed."""
        return sorted(entry.name for entry in os.scandir(self.root) if entry.is_dir(follow_symlinks=False))

    def usage(self, sandbox_id: str) -> dict[str, int]:
        """Disk the workspace takes (allocated blocks, links not followed) and, with a disk of its
        own, what the whole disk holds against its limit."""
        total = 0
        for dirpath, dirnames, filenames in os.walk(self.workspace(sandbox_id)):
            for name in dirnames + filenames:
                try:
                    total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
                except OSError:
                    pass  # removed while we walked
        usage = {"workspace_bytes": total}
        path = self.path(sandbox_id)
        if (path / IMAGE_NAME).exists():
            usage.update(disk_usage(path))
        return usage

    def remove(self, sandbox_id: str) -> None:
        unmount_disk(self.path(sandbox_id))
        shutil.rmtree(self.path(sandbox_id), ignore_errors=True)

    def close(self) -> None:
        """Server stop: every sandbox's disk unmounted (the next start mounts what it runs)."""
        for entry in self.root.iterdir():
            if (entry / IMAGE_NAME).exists():
                unmount_disk(entry)


def make_parts(base: Path) -> None:
    (base / "workspace").mkdir(exist_ok=True)
    (base / "tmp").mkdir(mode=0o1777, exist_ok=True)  # the sandbox's /tmp under bwrap
    (base / "tmp").chmod(0o1777)  # mkdir's mode is cut by the umask


def _aligned(size: int) -> int:
    return max(4096, int(size) // 4096 * 4096)

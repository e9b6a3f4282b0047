"""Checkpoints in a directory every node shares (more than one machine).

A pause seals the journal (already durable in PostgreSQL) and archives the sandbox's
``workspace/`` and ``tmp/`` into ``<checkpoint dir>/<sandbox id>/`` (``workspace_checkpoint``),
with the pause manifest next to it. Whichever node resumes the sandbox restores that archive
into its own data dir first. A node taking over from a dead one restores the last checkpoint
too: what the sandbox wrote to its workspace after it is lost (the journal loses nothing).
Only the node that ran a sandbox last keeps its own, newer, workspace when it takes it back.
"""
from __future__ import annotations

import os
from pathlib import Path

from . import workspace_checkpoint
from .checkpoint import Checkpoints
from .sandbox_dirs import SandboxDirectories, make_parts
from .tree_walk import remove_path


class SharedCheckpoints(Checkpoints):
    def __init__(self, dirs: SandboxDirectories, checkpoint_dir: Path) -> None:
        super().__init__(dirs)
        self.shared = Path(checkpoint_dir)

    def _state(self, sandbox_id: str) -> Path:
        path = self.shared / sandbox_id  # the pause manifest lives with the archive
        path.mkdir(parents=True, exist_ok=True)
        return path

    def fetch(self, sandbox_id: str, newest_here: bool) -> None:
        local = self.dirs.path(sandbox_id)
        if local.exists():
            self.dirs.prepare(sandbox_id, None)  # its disk mounted, when it has one here
        if newest_here and (self.dirs.rootfs_path(sandbox_id) / "workspace").is_dir():
            return
        manifest = workspace_checkpoint.read_manifest(self.shared, sandbox_id)
        if manifest is None:
            ensure_dirs(self.dirs, sandbox_id, None)  # never checkpointed: it starts from empty
            return
        ensure_dirs(self.dirs, sandbox_id, manifest.get("disk_bytes"))
        base = self.dirs.rootfs_path(sandbox_id)  # on its disk, when it has one: renames stay on it
        staging = base / f".restoring.{os.getpid()}"
        _remove_quietly(staging)
        try:
            workspace_checkpoint.restore(self.shared, sandbox_id, staging)
            for part in workspace_checkpoint.PARTS:
                target = base / part
                _remove_quietly(target)
                if (staging / part).exists():
                    os.replace(staging / part, target)
            ensure_dirs(self.dirs, sandbox_id, None)
        finally:
            _remove_quietly(staging)

    def seal(self, sandbox_id: str, store) -> None:
        store.journal.seal()
        rootfs = store.sandbox.config.get("rootfs") or {}
        extra = {"disk_bytes": rootfs["disk_bytes"]} if rootfs.get("disk_bytes") else {}
        workspace_checkpoint.save(self.dirs.rootfs_path(sandbox_id), self.shared, sandbox_id,
                                  store.sandbox.runtime_generation, extra)

    def remove(self, sandbox_id: str) -> None:
        _remove_quietly(self.shared / sandbox_id)


def ensure_dirs(dirs: SandboxDirectories, sandbox_id: str, disk_bytes: int | None) -> None:
    """The sandbox's local dirs on this node, as ``SandboxDirectories.create`` makes them (its disk
    of ``disk_bytes`` when this node gives sandboxes disks)."""
    if not dirs.path(sandbox_id).exists():
        dirs.create(sandbox_id, {"disk_bytes": disk_bytes} if disk_bytes else None)
        return
    dirs.prepare(sandbox_id, None)
    make_parts(dirs.rootfs_path(sandbox_id))
    dirs.state_dir(sandbox_id).mkdir(mode=0o700, exist_ok=True)
    dirs.secure(sandbox_id)


def _remove_quietly(path: Path) -> None:
    """A tree as deep as a tenant made it (``infra.tree_walk``), or nothing if it is not there."""
    try:
        remove_path(str(path))
    except OSError:
        pass

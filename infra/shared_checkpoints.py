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
from .sandbox_dirs import SandboxDirectories
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
        if newest_here and (local / "workspace").is_dir():
            return
        if workspace_checkpoint.read_manifest(self.shared, sandbox_id) is None:
            ensure_dirs(self.dirs, sandbox_id)  # never checkpointed: it starts from empty
            return
        staging = local.with_name(f".{sandbox_id}.restoring.{os.getpid()}")
        _remove_quietly(staging)
        try:
            workspace_checkpoint.restore(self.shared, sandbox_id, staging)
            ensure_dirs(self.dirs, sandbox_id)
            for part in workspace_checkpoint.PARTS:
                target = local / part
                _remove_quietly(target)
                if (staging / part).exists():
                    os.replace(staging / part, target)
            ensure_dirs(self.dirs, sandbox_id)
        finally:
            _remove_quietly(staging)

    def seal(self, sandbox_id: str, store) -> None:
        store.journal.seal()
        workspace_checkpoint.save(self.dirs.path(sandbox_id), self.shared, sandbox_id,
                                  store.sandbox.runtime_generation)

    def remove(self, sandbox_id: str) -> None:
        _remove_quietly(self.shared / sandbox_id)


def ensure_dirs(dirs: SandboxDirectories, sandbox_id: str) -> None:
    """The sandbox's local dirs on this node, as ``SandboxDirectories.create`` makes them."""
    if not dirs.path(sandbox_id).exists():
        dirs.create(sandbox_id)
        return
    for part, mode in (("workspace", 0o755), ("tmp", 0o700)):  # tmp: the sandbox uid's (infra.isolation)
        path = dirs.path(sandbox_id) / part
        if not path.exists():
            path.mkdir(mode=mode)
            path.chmod(mode)
    dirs.state_dir(sandbox_id).mkdir(mode=0o700, exist_ok=True)
    dirs.secure(sandbox_id)


def _remove_quietly(path: Path) -> None:
    """A tree as deep as a tenant made it (``infra.tree_walk``), or nothing if it is not there."""
    try:
        remove_path(str(path))
    except OSError:
        pass

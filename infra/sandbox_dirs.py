"""Sandbox directories on disk: ``<data>/sandboxes/<id>/{workspace,tmp,state}``.

The sandbox directory is its "rootfs": ``workspace/`` is what its processes see at
/workspace, ``tmp/`` their /tmp under bwrap, ``state/`` holds its store and checkpoint
manifest and is never visible to them.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path



class SandboxDirectories:
    def __init__(self, data_dir: Path) -> None:
        self.root = data_dir / "sandboxes"
        self.root.mkdir(parents=True, exist_ok=True)

    def path(self, sandbox_id: str) -> Path:
        return self.root / sandbox_id

    def workspace(self, sandbox_id: str) -> str:
        return str(self.path(sandbox_id) / "workspace")

    def state_dir(self, sandbox_id: str) -> Path:
        return self.path(sandbox_id) / "state"

    def create(self, sandbox_id: str, rootfs: dict | None = None) -> None:
        (self.path(sandbox_id) / "workspace").mkdir(parents=True)
        (self.path(sandbox_id) / "tmp").mkdir(mode=0o1777)  # the sandbox's /tmp under bwrap
        (self.path(sandbox_id) / "tmp").chmod(0o1777)  # mkdir's mode is cut by the umask
        self.state_dir(sandbox_id).mkdir(mode=0o700)

    def prepare(self, sandbox_id: str, rootfs: dict | None) -> None:
        """Nothing to mount: the directories are on the data dir's own filesystem."""

    def usage(self, sandbox_id: str) -> dict[str, int]:
        """Disk the workspace takes (allocated blocks, links not followed): no quota, a report."""
        total = 0
        for dirpath, dirnames, filenames in os.walk(self.workspace(sandbox_id)):
            for name in dirnames + filenames:
                try:
                    total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
                except OSError:
                    pass  # removed while we walked
        return {"workspace_bytes": total}

    def remove(self, sandbox_id: str) -> None:
        shutil.rmtree(self.path(sandbox_id), ignore_errors=True)

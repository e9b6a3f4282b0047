"""Where a sandbox's /tmp lives on the host (next to its workspace, so it is checkpointed)."""
from __future__ import annotations

import os


def sandbox_tmp_dir(workspace_dir: str) -> str | None:
    """The sandbox's /tmp on its rootfs (next to the workspace), when it has one: then /tmp is
    checkpointed with the workspace and reachable by the file API. Older sandboxes get a tmpfs."""
    tmp = os.path.join(os.path.dirname(workspace_dir.rstrip("/")), "tmp")
    return tmp if os.path.isdir(tmp) else None

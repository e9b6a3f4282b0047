"""What makes one sandbox's processes its own: an unprivileged host uid, cgroups, limits.

``SandboxConfinement`` is the per-sandbox launch context the bubblewrap runtime wraps every
process in. The host uid is the workspace's owner: it is chosen at claim (a free uid in
``UID_BASE ..``, starting from a hash of the sandbox id so that two servers on one machine
rarely pick the same one), the workspace is chowned to it, and a resume or a server
restart reads it back from the workspace, so nothing else needs to remember it. Inside
the sandbox that uid is root (bubblewrap maps it to 0 in the sandbox's user namespace).
"""
from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from .cgroups import Limits, SandboxCgroup
from .tree_walk import DIR_OPEN, walk_tree
from .uids import UID_BASE, UID_SPAN, UidTable
DEFAULT_MEMORY = 2 * 2**30   # template default (contract: 128Mi .. 16Gi)
DEFAULT_PIDS_MAX = 1024
_QUANTITY = re.compile(r"^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|K|M|G|T)?$")
_UNIT = {None: 1, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40,
         "k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}


@dataclass
class SandboxConfinement:
    sandbox_id: str
    uid: int | None            # None: the server is not root and runs sandboxes as itself
    limits: Limits
    cgroup: SandboxCgroup | None = None
    netns_path: str | None = None  # joined before privileges are dropped (per-sandbox network)
    rootfs: str | None = None      # the overlay over its image (infra.rootfs), bound at / by each launch
    workspace_dir: str = ""
    notes: list[str] = field(default_factory=list)
    # Volumes bound at mount points other than /workspace (infra.volume_binding): (name under the
    # sandbox's mounts/ dir, mount point, read-only), bound by each launch.
    mounts: list[tuple[str, str, bool]] = field(default_factory=list)
    mounts_dir: str = ""  # the host directory holding those binds, staged by each launch
    launch_ns: int | None = None  # its launch namespace, open (infra.launch_namespace); closed at release
    volume_at_workspace: bool = False  # a volume is bound on its workspace (infra.volume_binding)


def memory_bytes(quantity: str | None) -> int:
    """A Kubernetes quantity (already validated by the API) in bytes; None -> the default."""
    match = _QUANTITY.match(quantity.strip()) if isinstance(quantity, str) else None
    if match is None:
        return DEFAULT_MEMORY
    return int(float(match[1]) * _UNIT[match[2]])


def limits_for(config: dict, pids_max: int = DEFAULT_PIDS_MAX) -> Limits:
    memory = memory_bytes((config.get("resources") or {}).get("memory"))
    # CPU is derived from memory, as the reference does: 1024 shares per 2 GiB, within 128..8192.
    cpu = max(128, min(8192, memory * 1024 // DEFAULT_MEMORY))
    return Limits(memory_bytes=memory, pids_max=pids_max, cpu_weight=cpu)


def _owner(path: Path) -> int | None:
    try:
        return path.stat().st_uid
    except OSError:
        return None


NEW_OWNER = ".new-owner"  # set by infra.sandbox_images on a disk copied from another sandbox


def sandbox_uid(sandbox_id: str, workspace: str, uids: UidTable | None = None) -> int:
    """The workspace owner's uid, allotting (and chowning to) a free one on first use. A disk
    copied from another sandbox (a fork, a claim from a snapshot, a restore of another sandbox's
    snapshot) holds that sandbox's uid: it gets a uid of its own, and every file of it is handed
    over, so no two sandboxes ever share a host uid (per-uid kernel limits, signals). With the
    server's ``uids`` table a free uid is found there; without one, by looking at every other
    sandbox's workspace."""
    ws = Path(workspace)
    on_disk = ws.parent.name == "disk"
    own = ws.parent.parent if on_disk else ws.parent  # on its own disk, or not
    copied = (own / NEW_OWNER).exists()
    current = _owner(ws)
    if current is not None and UID_BASE <= current < UID_BASE + UID_SPAN and not copied:
        if uids is None or uids.hold(current, sandbox_id):
            own_tmp(ws, current)
            return current
        copied = on_disk  # another sandbox holds that uid (its disk was not mounted when we looked)
    if uids is not None:
        uid = uids.allot(sandbox_id)
    else:
        taken = {_owner(workspace) for other in own.parent.iterdir() if other != own
                 for workspace in (other / "workspace", other / "disk" / "workspace")}
        start = int.from_bytes(hashlib.sha256(sandbox_id.encode()).digest()[:8], "big") % UID_SPAN
        for step in range(UID_SPAN):
            uid = UID_BASE + (start + step) % UID_SPAN
            if uid not in taken:
                break
    if copied:  # its own filesystem: no host file can be linked into it, every entry is its
        for part in ("workspace", "upper"):
            if (ws.parent / part).is_dir():
                chown_tree(ws.parent / part, uid, links_too=True, mode=0o755 if part == "workspace" else None)
    else:
        chown_tree(ws, uid)
    own_tmp(ws, uid)
    (own / NEW_OWNER).unlink(missing_ok=True)
    return uid


def own_tmp(workspace: Path, uid: int) -> None:
    """The sandbox's on-disk /tmp belongs to its uid and to nobody else (0700: no other local user
    may drop files into it); older data dirs made it root's, mode 1777."""
    tmp = workspace.parent / "tmp"
    try:
        info = os.lstat(tmp)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(info.st_mode):
        return
    if info.st_uid != uid:
        os.chown(tmp, uid, uid)
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(tmp, 0o700)


def chown_tree(root: Path, uid: int, links_too: bool = False, mode: int | None = 0o755) -> None:
    """Hand a workspace to its sandbox's uid (a new one is empty; an old root-owned one is not).
    Iterative and descriptor-relative (``infra.tree_walk``): the tree may be as deep as a tenant made it."""
    os.chown(root, uid, uid, follow_symlinks=False)
    if mode is not None:
        os.chmod(root, mode)

    def chown(dir_fd: int, entry: os.DirEntry) -> None:
        info = entry.stat(follow_symlinks=False)
        if not links_too and not stat.S_ISDIR(info.st_mode) and info.st_nlink > 1:
            return  # a hard link may be a host file (an old unisolated sandbox made it)
        os.chown(entry.name, uid, uid, dir_fd=dir_fd, follow_symlinks=False)

    fd = os.open(root, DIR_OPEN)
    try:
        walk_tree(fd, on_entry=chown)
    finally:
        os.close(fd)

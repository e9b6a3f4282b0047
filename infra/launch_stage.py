"""Where bubblewrap finds a running sandbox's directories: ``/run/sessiond/<tag>/<sandbox>``.

bubblewrap runs as the sandbox's uid, which cannot walk the data dir (0700 parents such as
/root). Each launch used to make a mount namespace of its own and bind the workspace and /tmp
onto fixed staging points there (``unshare --mount``, then a ``mount`` per directory: processes
of 1-3 ms each on every launch), and the outer bwrap kept that namespace, a copy of every mount
of the host, as long as the attempt ran: with 120 sandboxes live their bwraps held 56,000 mounts.

Now each running sandbox has one stage, made at its runtime's first launch (when its disk, its
image's overlay and its volumes are all in place) and removed with its runtime: a directory
``root:<sandbox gid>`` mode 0710 under a root-only-listable parent (0711), holding binds of what
the sandbox may see (``workspace``, ``tmp``, ``rootfs``, ``mounts``), made with mount(2) in the
server. Only root and the sandbox's own uid can enter it, and nothing else on the host runs as
that uid but the sandbox's own launch; the sandbox's processes never see /run at all (bwrap
shows them only what it binds). A server started after a crash detaches whatever the killed one
left there.
"""
from __future__ import annotations

import ctypes
import errno
import logging
import os
import threading
from dataclasses import dataclass

log = logging.getLogger(__name__)

STAGES_ROOT = "/run/sessiond/stages"

_MS_BIND = 4096
_MS_REC = 16384
_MNT_DETACH = 2
_libc = ctypes.CDLL(None, use_errno=True)


def _mount(source: str | None, target: str, flags: int) -> None:
    if _libc.mount(source.encode() if source else None, target.encode(), None, flags, None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source} on {target}: {os.strerror(err)}")


def _detach(target: str) -> None:
    if _libc.umount2(target.encode(), _MNT_DETACH) != 0:
        err = ctypes.get_errno()
        if err not in (errno.EINVAL, errno.ENOENT):  # not a mount point (any more)
            raise OSError(err, f"umount {target}: {os.strerror(err)}")


@dataclass(frozen=True)
class Stage:
    """Paths of one sandbox's stage (None: the sandbox has no such directory)."""

    path: str
    workspace: str
    tmp: str | None
    rootfs: str | None
    mounts: str | None


class LaunchStages:
    def __init__(self, tag: str, root: str = STAGES_ROOT) -> None:
        self.root = os.path.join(root, tag)
        self._stages: dict[str, Stage] = {}
        self._lock = threading.Lock()

    def start(self) -> None:
        """Before any sandbox of ours runs: a killed server's stages detached and removed."""
        if os.path.isdir(self.root):
            left = [entry.path for entry in os.scandir(self.root) if entry.is_dir(follow_symlinks=False)]
            for path in left:
                self._remove(path)
            if left:
                log.info("removed %d sandbox stage(s) left by an earlier server", len(left))
            self._remove_root()

    def close(self) -> None:
        for sandbox_id in list(self._stages):
            self.release(sandbox_id)

    def stage(self, sandbox_id: str, gid: int, workspace: str, tmp: str | None, rootfs: str | None,
              mounts: str | None) -> Stage:
        """The sandbox's stage, made on its first launch (the same one after)."""
        found = self._stages.get(sandbox_id)
        if found is not None:
            return found
        path = os.path.join(self.root, sandbox_id)
        if os.path.isdir(path):  # a runtime before this one was not released cleanly
            self._remove(path)
        with self._lock:  # the parent exists only while some sandbox has a stage (no empty leftovers)
            os.makedirs(self.root, mode=0o711, exist_ok=True)
            os.chmod(self.root, 0o711)
            os.mkdir(path, 0o710)
        try:
            os.chown(path, 0, gid)
            os.chmod(path, 0o710)
            parts = {}
            for name, source, flags in (("workspace", workspace, _MS_BIND | _MS_REC), ("tmp", tmp, _MS_BIND),
                                        ("rootfs", rootfs, _MS_BIND | _MS_REC), ("mounts", mounts, _MS_BIND | _MS_REC)):
                if source:
                    target = os.path.join(path, name)
                    os.mkdir(target, 0o700)
                    _mount(source, target, flags)
                    parts[name] = target
        except BaseException:
            self._remove(path)
            raise
        stage = Stage(path, parts["workspace"], parts.get("tmp"), parts.get("rootfs"), parts.get("mounts"))
        self._stages[sandbox_id] = stage
        return stage

    def release(self, sandbox_id: str) -> None:
        """The runtime is gone (its processes ended): its stage goes."""
        stage = self._stages.pop(sandbox_id, None)
        if stage is not None:
            self._remove(stage.path)
            self._remove_root()

    def _remove_root(self) -> None:
        with self._lock:
            try:
                os.rmdir(self.root)
            except OSError:  # another sandbox's stage is in it (or it is gone)
                pass

    @staticmethod
    def _remove(path: str) -> None:
        for name in ("workspace", "tmp", "rootfs", "mounts"):
            target = os.path.join(path, name)
            if os.path.isdir(target):
                try:
                    _detach(target)
                    os.rmdir(target)
                except OSError as exc:
                    log.warning("stage %s: %s", target, exc)
        try:
            os.rmdir(path)
        except OSError as exc:
            log.warning("stage %s: %s", path, exc)

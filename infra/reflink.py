"""Whole-image file operations: a reflink (or, where the filesystem has none, a sparse copy), and
the filesystem freeze that makes a mounted disk's image consistent while it is copied.

``clone_file`` uses the ``FICLONE`` ioctl (XFS, btrfs): the copy shares every block with its source
and costs a few extent records whatever the size; on a filesystem without reflinks it falls back
to ``cp --sparse=always``, which reads everything but writes only the blocks that hold data.
``frozen(mount point)`` is ``FIFREEZE`` / ``FITHAW`` (what ``fsfreeze`` does): the filesystem
writes back everything and its journal, blocks new writes, and its image on the disk below is a
clean filesystem until the thaw. A server killed while a disk is frozen leaves it frozen; the
next start thaws every disk it mounts (``thaw``), so no process stays blocked on it.
"""
from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import subprocess
from contextlib import contextmanager
from pathlib import Path

FICLONE = 0x40049409    # _IOW(0x94, 9, int)
FIFREEZE = 0xC0045877   # _IOWR('X', 119, int)
FITHAW = 0xC0045878     # _IOWR('X', 120, int)
_libc = ctypes.CDLL(None, use_errno=True)
_NO_REFLINK = {errno.EOPNOTSUPP, errno.EXDEV, errno.EINVAL, errno.ENOTTY}


def clone_file(source: Path, target: Path) -> bool:
    """``target`` (new) made a copy of ``source``; True when it is a reflink, False for a copy.
    The copy is fsynced: it is complete on disk before the caller names it complete."""
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with open(source, "rb") as src:
            try:
                fcntl.ioctl(fd, FICLONE, src.fileno())
                os.fsync(fd)
                return True
            except OSError as exc:
                if exc.errno not in _NO_REFLINK:
                    raise
    except BaseException:
        target.unlink(missing_ok=True)
        raise
    finally:  # an open descriptor would keep a deleted snapshot's blocks allocated
        os.close(fd)
    target.unlink()
    result = subprocess.run(["cp", "--sparse=always", "--reflink=never", str(source), str(target)],
                            capture_output=True, text=True, timeout=3600, check=False)
    if result.returncode != 0:
        target.unlink(missing_ok=True)
        code = errno.ENOSPC if "No space left" in result.stderr else errno.EIO
        raise OSError(code, f"copying {source.name} failed: {result.stderr.strip()}")
    with open(target, "rb+") as copied:
        os.fsync(copied.fileno())
    return False


def syncfs(point: Path) -> None:
    """Write back what is dirty on the filesystem mounted at ``point`` (without freezing it), so
    the freeze that follows has little left to write while the sandbox waits."""
    fd = os.open(point, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if _libc.syncfs(fd) != 0:
            raise OSError(ctypes.get_errno(), "syncfs failed")
    finally:
        os.close(fd)


@contextmanager
def frozen(point: Path):
    """The filesystem mounted at ``point`` frozen (consistent on its device) for the block."""
    fd = os.open(point, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.ioctl(fd, FIFREEZE, 0)
        try:
            yield
        finally:
            fcntl.ioctl(fd, FITHAW, 0)
    finally:
        os.close(fd)


def thaw(point: Path) -> bool:
    """Thaw the filesystem at ``point`` if a killed server left it frozen; True when it was."""
    try:
        fd = os.open(point, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return False
    try:
        fcntl.ioctl(fd, FITHAW, 0)
        return True
    except OSError:  # EINVAL: it was not frozen
        return False
    finally:
        os.close(fd)


def fsync_dir(directory: Path) -> None:
    """A rename in ``directory`` made durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

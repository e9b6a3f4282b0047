"""An idmapped, read-only bind mount: an image's root-owned files seen as a sandbox's uid.

A sandbox runs as its own unprivileged host uid, root only inside its user namespace. The image
rootfs is unpacked once, owned by host root, and shared by every sandbox of the image; through an
overlay the sandbox could read it but never write ``/etc`` (owned by a uid its namespace does not
map). An idmapped mount of the image (Linux 5.12+, overlayfs over idmapped layers 5.19+) shows
uid/gid 0 as the sandbox's uid without touching the files, so the overlay above it copies files up
owned by the sandbox, and ``/etc`` is its own to change in its writable layer. Other uids of the
image are not mapped and read as ``nobody`` (Debian-based images own almost everything by root).

util-linux gained ``mount -o X-mount.idmap`` only in 2.39 (Debian 12 has 2.38), so the three
system calls (``open_tree``, ``mount_setattr``, ``move_mount``) are made through ctypes; the user
namespace that carries the mapping is a short-lived ``unshare --user`` child whose maps root
writes, as ``newuidmap`` would.
"""
from __future__ import annotations

import ctypes
import os
import platform
import subprocess
import time

_SYSCALLS = {"x86_64": (428, 429, 442), "aarch64": (428, 429, 442)}  # open_tree, move_mount, mount_setattr
OPEN_TREE_CLONE = 1
OPEN_TREE_CLOEXEC = os.O_CLOEXEC
AT_FDCWD = -100
AT_EMPTY_PATH = 0x1000
MOVE_MOUNT_F_EMPTY_PATH = 0x4
MOUNT_ATTR_RDONLY = 0x1
MOUNT_ATTR_NOSUID = 0x2
MOUNT_ATTR_NODEV = 0x4
MOUNT_ATTR_IDMAP = 0x100000

_libc = ctypes.CDLL(None, use_errno=True)


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


class IdmapError(OSError):
    pass


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise IdmapError(err, f"{what}: {os.strerror(err)}")
    return result


def _userns_mapping(uid: int) -> tuple[subprocess.Popen, int]:
    """A user namespace mapping 0 -> ``uid`` (and gid), held open by a waiting child."""
    child = subprocess.Popen(["unshare", "--user", "--", "cat"], stdin=subprocess.PIPE,
                             stdout=subprocess.DEVNULL, close_fds=True)
    own = os.stat("/proc/self/ns/user").st_ino
    deadline = time.monotonic() + 5
    while os.stat(f"/proc/{child.pid}/ns/user").st_ino == own:  # until it has unshared
        if time.monotonic() > deadline or child.poll() is not None:
            child.kill()
            raise IdmapError(0, "unshare --user did not start")
        time.sleep(0.0005)
    try:
        for name, text in (("uid_map", f"0 {uid} 1\n"), ("setgroups", "deny"), ("gid_map", f"0 {uid} 1\n")):
            with open(f"/proc/{child.pid}/{name}", "w") as f:
                f.write(text)
        return child, os.open(f"/proc/{child.pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    except BaseException:
        child.kill()
        child.wait()
        raise


def idmapped_bind(source: str, target: str, uid: int, read_only: bool = True) -> None:
    """Mount ``source`` at ``target``, read-only (unless ``read_only`` is false: a volume bound into
    a sandbox), nosuid, nodev, with uid/gid 0 shown as ``uid``."""
    open_tree, move_mount, mount_setattr = _SYSCALLS[platform.machine()]
    child, userns = _userns_mapping(uid)
    tree = -1
    try:
        tree = _check(_libc.syscall(open_tree, AT_FDCWD, os.fsencode(source),
                                    OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC), f"open_tree {source}")
        flags = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (MOUNT_ATTR_RDONLY if read_only else 0)
        attr = _MountAttr(flags, 0, 0, userns)
        _check(_libc.syscall(mount_setattr, tree, b"", AT_EMPTY_PATH, ctypes.byref(attr), ctypes.sizeof(attr)),
               f"mount_setattr (idmap) on {source}")
        _check(_libc.syscall(move_mount, tree, b"", AT_FDCWD, os.fsencode(target), MOVE_MOUNT_F_EMPTY_PATH),
               f"move_mount to {target}")
    finally:
        if tree >= 0:
            os.close(tree)
        os.close(userns)
        child.kill()
        child.wait()

"""A mount namespace per running sandbox, in which its launches start bubblewrap.

bubblewrap runs as the sandbox's uid, which cannot walk the data dir (0700 parents such as
/root), so something must bind the sandbox's directories where that uid can reach them. And
bubblewrap's own start costs time in proportion to the mounts it can see: it reads the mount
table again for every bind it makes, and with 3,000 mounts on the host a bare bwrap took 164 ms
instead of 10. Every sandbox adds mounts to the host's table (its disk, its network namespace's
handle), so a bwrap started in the host's namespace, or in a copy of it, got slower with every
sandbox live (the floor, ``unshare --net`` + bwrap, went from 20 to 490 ms at 1,000).

So each sandbox gets a namespace of its own, made once (for a warm directory ahead of its claim,
``infra.warm_pool``; otherwise at its runtime's first launch): a copy of the host's in which its
workspace and /tmp (or its disk's root, which holds both), an image's overlay and its volumes are
bound onto the fixed staging points under /run/sessiond, and from which the data dir and
/run/netns are then detached (``infra.mount_scope``), so that it holds the host's own mounts and
this sandbox's, nothing of any other. It is private: nothing mounted on the host later reaches
it. The server keeps it open as a file descriptor, and each launch's chain enters it with
nsenter (``/proc/<server>/fd/<n>``) together with the network namespace and the uid; the
namespace goes when its descriptor is closed (with the runtime) and its last process is gone, so
a crash of the server leaves nothing behind.
"""
from __future__ import annotations

import os
import select
import subprocess

from .launch_chain import CHAIN_PATH, Hardening, staged_together
from .sandbox_tmp import sandbox_tmp_dir

READY_TIMEOUT_S = 30.0

# Runs under ``unshare --mount --propagation private``: the binds, the detach, then "ready" on
# stdout and a wait for stdin to close (the server has opened the namespace by then).
_MAKE = r"""
"$1" -n --rbind "$3" "$4" || exit 125
[ -z "$5" ] || "$1" -n --bind "$5" "$6" || exit 125
[ -z "$7" ] || "$1" -n --bind "$7" "$8" || exit 125
[ -z "$9" ] || "$1" -n --rbind "$9" "${10}" || exit 125
u=$2
shift 10
[ "$#" -eq 0 ] || "$u" -n -l "$@" 2>/dev/null
echo ready
read -r _
"""


class LaunchNamespaceError(OSError):
    pass


def make_launch_namespace(hard: Hardening, workspace_dir: str, rootfs: str | None = None,
                          mounts_dir: str | None = None) -> int:
    """The sandbox's namespace, open (a descriptor the caller owns). Blocking: a few processes."""
    together = staged_together(workspace_dir)
    tmp = "" if together else sandbox_tmp_dir(workspace_dir) or ""
    argv = [hard.unshare, "--mount", "--propagation", "private", hard.bash, "--norc", "-p", "-c", _MAKE,
            "sandbox-namespace", hard.mount, hard.umount or "", together or workspace_dir, hard.stage_dir,
            tmp, hard.stage_tmp_dir, rootfs or "", hard.stage_root_dir, mounts_dir or "", hard.stage_mounts_dir,
            *(hard.detach if hard.umount else [])]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={"PATH": CHAIN_PATH}, cwd="/", close_fds=True)
    try:
        poller = select.poll()  # a busy server's descriptors run past select()'s 1,024
        poller.register(proc.stdout, select.POLLIN)
        line = proc.stdout.readline() if poller.poll(READY_TIMEOUT_S * 1000) else b""
        if line != b"ready\n":
            proc.kill()
            _, err = proc.communicate(timeout=10)
            raise LaunchNamespaceError(f"the sandbox's mount namespace could not be made: "
                                       f"{err.decode(errors='replace').strip() or 'no answer'}")
        fd = os.open(f"/proc/{proc.pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        if proc.poll() is None:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    return fd


def namespace_path(fd: int) -> str:
    """Where a child of this process finds the namespace the descriptor holds."""
    return f"/proc/{os.getpid()}/fd/{fd}"

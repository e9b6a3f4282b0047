"""The data dir as a mount point of its own, so a sandbox's launch namespace can let go of
every other sandbox's mounts at once.

A sandbox's launch namespace (``infra.launch_namespace``) starts as a copy of the host's, and
every sandbox adds mounts to the host's table (its disk, its network namespace's handle in
/run/netns); bubblewrap, started there, pays for each mount it can see. So once the sandbox's
own directories are staged, the namespace detaches the data dir and /run/netns with one
``umount -l``, and keeps only the host's own mounts and the sandbox's.

That needs the data dir to be a mount point: when it is not one already, the server binds it
onto itself (private: nothing mounted below it propagates anywhere) at start, before anything of
its own is mounted there, and undoes that at stop. A marker in ``runtime/`` says the bind is the
server's own, so a server started after a crash finds it and the next stop undoes it.
"""
from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path

from .rootfs import mount_points

log = logging.getLogger(__name__)

MARK = "data-dir-bound"  # in <data>/runtime: the data dir's mount is this server's own bind
NETNS_DIR = "/run/netns"


def _mark(data_dir: Path) -> Path:
    return data_dir / "runtime" / MARK


def _run(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    return "" if done.returncode == 0 else (done.stderr.strip() or f"exit {done.returncode}")


def scope_data_dir(data_dir: Path) -> list[str]:
    """Make the data dir a mount point when it can be; returns what a launch should detach."""
    data = str(Path(data_dir).resolve())
    points = mount_points()
    if data not in points and os.geteuid() == 0:
        below = [p for p in points if p.startswith(data + "/")]
        if below:  # a bind now would hide them: next time, once they are gone
            log.info("the data dir is not a mount point and %d mount(s) are below it: launches keep a copy "
                     "of every sandbox's mounts until a start finds none", len(below))
        else:
            problem = _run(["mount", "--bind", data, data]) or _run(["mount", "--make-private", data])
            if problem:
                log.warning("could not bind the data dir onto itself (%s): launches keep a copy of every "
                            "sandbox's mounts", problem)
            else:
                _mark(data_dir).parent.mkdir(parents=True, exist_ok=True)
                _mark(data_dir).write_text("the data dir's mount is sessiond's own bind of it\n")
                points = mount_points()
    return [p for p in (data, NETNS_DIR) if p in points]


def release_data_dir(data_dir: Path) -> None:
    """Undo the server's own bind, once nothing is mounted below it; left as it is otherwise (the
    next start keeps using it, and a later stop tries again)."""
    mark = _mark(data_dir)
    if not mark.exists():
        return
    data = str(Path(data_dir).resolve())
    below = [p for p in mount_points() if p.startswith(data + "/")]
    if below:
        log.warning("the data dir stays bound onto itself: %d mount(s) are still below it", len(below))
        return
    problem = _run(["umount", "--lazy", data])  # the server's own files there (its lock) are still open
    if problem:
        log.warning("could not undo the data dir's bind: %s", problem)
        return
    mark.unlink(missing_ok=True)


def outside_own_bind(data_dir: Path, argv: list[str]) -> list[str] | None:
    """``argv`` wrapped to run where the data dir is not the server's bind of itself: in a mount
    namespace of its own with that bind taken away, so the path is the data dir's plain directory
    on its filesystem. link(2) refuses to cross a mount even within one filesystem, so hard links
    from elsewhere (a build cache) into the data dir need it. None when there is no such bind."""
    if not _mark(data_dir).exists():
        return None
    data = str(Path(data_dir).resolve())
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", 'umount -l -- "$0" && exec "$@"',
            data, *argv]


"""Volumes bound into a sandbox, for as long as its runtime lives: the launcher's isolator, wrapped.

A sandbox claimed with ``mounts`` has them in its config (``[{sandboxvolume_id, mount_point,
read_only}]``). When its runtime is made (claim, resume, server start) each volume's disk is
mounted on this node (``infra.volume_mounts``) and bound, on the host side:

- at ``/workspace``: over the sandbox's own workspace directory, so every launch's chain binds it
  at /workspace as before (``infra.launch_chain``) and the sandbox's own workspace stays hidden
  below it, untouched; the sandbox file API reads and writes the volume's own mount instead;
- elsewhere: at ``<sandbox>/mounts/<n>``, which each hardened launch stages and bubblewrap binds
  at the mount point (``infra.bubblewrap``).

The binds are **idmapped** (``infra.idmap``): a volume's files are stored owned by uid 0 and the
sandbox sees them as its own uid, whichever sandbox binds the volume next, without a chown of the
tree (each sandbox runs as a uid of its own). ``ROX`` volumes are bound read-only. When the runtime
is released (pause, delete, server stop), after its processes are gone, the binds are undone and
the disk's use counted out, so a paused sandbox's volume can be snapshotted or restored and the
next runtime binds it again. A bind a killed server left behind is undone before the runtime is
made: a sandbox's uid is read from its workspace directory, which must be its own.
"""
from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path

from session_supervisor.domain.model.volumes import WORKSPACE, VolumeNotFoundError

from .idmap import idmapped_bind
from .rootfs import mount_points
from .volume_mounts import VolumeMounts

log = logging.getLogger(__name__)

MOUNTS_DIR = "mounts"


def sandbox_dir_of(workspace_dir: str) -> Path:
    workspace = Path(workspace_dir)
    return workspace.parent.parent if workspace.parent.name == "disk" else workspace.parent


class VolumeBinding:
    """The isolator the sandbox manager uses: the launcher's, plus the volumes of each sandbox."""

    def __init__(self, launcher, mounts: VolumeMounts) -> None:
        self.launcher = launcher
        self.mounts = mounts
        self._workspaces: dict[str, str] = {}  # sandbox id -> the raw mount of its /workspace volume

    def __getattr__(self, name):  # name, hardening, launch, … are the launcher's own
        return getattr(self.launcher, name)

    def workspace_of(self, sandbox_id: str) -> str | None:
        """Where the file API finds the sandbox's /workspace when a volume is bound there."""
        return self._workspaces.get(sandbox_id)

    def isolate(self, sandbox_id: str, workspace_dir: str, config: dict):
        wanted = config.get("mounts") or []
        if not wanted:
            return self.launcher.isolate(sandbox_id, workspace_dir, config)
        staging = sandbox_dir_of(workspace_dir) / MOUNTS_DIR
        unbind_below([workspace_dir, str(staging)])  # what a killed server left: see above
        bound = self.launcher.isolate(sandbox_id, workspace_dir, config)
        confinement = bound.confinement
        uid = confinement.uid if confinement is not None else None
        attached: list[str] = []
        targets: list[str] = []
        try:
            for index, mount in enumerate(wanted):
                volume_id, point = mount["sandboxvolume_id"], mount["mount_point"]
                if point != WORKSPACE and (confinement is None or self.launcher.hardening is None):
                    log.warning("sandbox %s: %s cannot be mounted at %s without the hardened runtime",
                                sandbox_id, volume_id, point)
                    continue
                record = self.mounts.store.volume(volume_id)
                if record is None or not record.bound_to(sandbox_id):
                    # Deleted with force since the claim, or a config copied from another sandbox:
                    # only the volume's own record says who may mount it (RWO).
                    log.warning("sandbox %s: sandboxvolume %s is %s; %s is not mounted", sandbox_id, volume_id,
                                "gone" if record is None else "not bound to it", point)
                    continue
                try:
                    source = self.mounts.attach(volume_id)
                except VolumeNotFoundError:
                    log.warning("sandbox %s: sandboxvolume %s no longer exists; %s is not mounted",
                                sandbox_id, volume_id, point)
                    continue
                attached.append(volume_id)
                read_only = bool(mount.get("read_only"))
                if point == WORKSPACE:
                    target = workspace_dir
                    self._workspaces[sandbox_id] = source
                    if confinement is not None:  # a launch namespace made before this bind lacks it
                        confinement.volume_at_workspace = True
                else:
                    staging.mkdir(mode=0o711, exist_ok=True)  # bwrap (the sandbox's uid) walks through it
                    target = str(staging / str(index))
                    os.makedirs(target, mode=0o755, exist_ok=True)
                    confinement.mounts.append((str(index), point, read_only))
                    confinement.mounts_dir = str(staging)
                bind(source, target, uid, read_only)
                targets.append(target)
        except BaseException:
            self._undo(sandbox_id, targets, attached)
            bound.release()
            raise
        return VolumeBoundLauncher(bound, lambda: self._undo(sandbox_id, targets, attached))

    def _undo(self, sandbox_id: str, targets: list[str], attached: list[str]) -> None:
        self._workspaces.pop(sandbox_id, None)
        unbind_below(targets)
        for volume_id in attached:
            self.mounts.detach(volume_id)
        targets.clear()
        attached.clear()


    def clean_up(self, sandboxes_root: Path) -> None:
        """Server start, before any runtime: the binds a killed server left in sandbox directories
        are undone, so nothing below reads a sandbox's uid from a volume or removes a volume's files
        with a sandbox directory."""
        root = str(sandboxes_root).rstrip("/") + "/"
        stale = []
        for point in mount_points():
            if point.startswith(root):
                rest = point[len(root):].split("/")[1:]
                if rest in (["workspace"], ["disk", "workspace"]) or rest[:1] == [MOUNTS_DIR]:
                    stale.append(point)
        unbind_below(stale)
        if stale:
            log.info("undid %d volume bind(s) a stopped server left behind", len(stale))


class VolumeBoundLauncher:
    """A sandbox's BoundLauncher whose release also undoes its volumes' binds (after its processes)."""

    def __init__(self, inner, undo) -> None:
        self._inner = inner
        self._undo = undo

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def release(self) -> None:
        try:
            self._inner.release()
        finally:
            self._undo()


def bind(source: str, target: str, uid: int | None, read_only: bool) -> None:
    """``source`` at ``target``: idmapped to ``uid`` (the hardened runtime), else a plain bind
    (the host runtime runs processes as the server's own user)."""
    if uid is not None:
        idmapped_bind(source, target, uid, read_only=read_only)
        return
    _mount(["--bind", source, target])
    if read_only:
        _mount(["-o", "remount,bind,ro,nosuid,nodev", target])


def unbind_below(paths: list[str]) -> None:
    """Every mount at or below each path, deepest first (lazily: nothing of the sandbox runs)."""
    present = mount_points()
    for path in paths:
        below = sorted((p for p in present if p == path or p.startswith(path.rstrip("/") + "/")), reverse=True)
        for point in below:
            result = subprocess.run(["umount", "--lazy", point], capture_output=True, text=True, timeout=60,
                                    check=False)
            if result.returncode != 0:
                log.warning("umount %s: %s", point, result.stderr.strip())


def _mount(args: list[str]) -> None:
    result = subprocess.run(["mount", *args], capture_output=True, text=True, timeout=60, check=False)
    if result.returncode != 0:
        raise OSError(f"mount {' '.join(args)} failed: {result.stderr.strip() or result.returncode}")

"""Sandbox volumes of a team: create, fork, snapshots, restore, delete, and binding them at claim.

Every volume belongs to the team of the key that made it; another team's id does not exist for a
caller (404), except that a delete of an unknown id answers as done (the reference's idempotent
delete). A volume is bound to a sandbox at claim and stays bound until the sandbox is deleted: an
``RWO`` volume to one sandbox at a time (a second claim is 409), an ``ROX`` volume read-only to
any number. Deleting a bound volume is 409 unless ``force``. What the team's volumes take counts
against its quota (``model.volumes.team_usage``: 429 past it); the server's own disk reserve comes
first (507). Records and disks are the ``VolumeStore``'s, this node's mounts the ``VolumeMounts``'.
"""
from __future__ import annotations

import asyncio
import errno
import logging
from contextlib import asynccontextmanager, contextmanager
from typing import Callable

from .model.access import Principal
from .model.errors import InsufficientStorageError, UnavailableError
from .model.timefmt import rfc3339
from .model.volumes import (
    Binding,
    Volume,
    VolumeConflictError,
    VolumeNotFoundError,
    VolumeQuotaError,
    VolumeRequestError,
    VolumeSnapshot,
    VolumeSnapshotNotFoundError,
    parse_access_mode,
    team_usage,
)
from .ports import VolumeMounts, VolumeStore

log = logging.getLogger(__name__)

DEFAULT_SIZE = 8 * 2**30
DEFAULT_QUOTA = 256 * 2**30


@contextmanager
def disk_errors(what: str):
    """A disk that could not be made, copied or mounted: 507 when the host's disk is full, else 503
    with the tool's own words (a retry may succeed), never a bare 500."""
    try:
        yield
    except FileNotFoundError as exc:  # the volume was deleted meanwhile
        raise VolumeNotFoundError() from exc
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise InsufficientStorageError(f"{what}: no space left on the server's disk ({reason})") from exc
        raise UnavailableError(f"{what}: {reason}") from exc


class NoVolumes:
    """A server without volumes: a claim that names one is refused rather than run without it."""

    async def bind(self, sandbox_id: str, team_id: str, mounts: list[dict]) -> list[dict]:
        if mounts:
            raise VolumeRequestError("sandbox volumes are not available on this server")
        return []

    async def unbind(self, sandbox_id: str) -> None:
        return None

    async def reconcile(self, sandboxes: set[str]) -> None:
        return None


class Volumes:
    def __init__(self, store: VolumeStore, mounts: VolumeMounts, clock_ns: Callable[[], int],
                 new_id: Callable[[], str], *, quota_bytes: int = DEFAULT_QUOTA,
                 default_size: int = DEFAULT_SIZE, admit_space: Callable[[], None] = lambda: None) -> None:
        self.store, self.mounts, self.clock_ns, self.new_id = store, mounts, clock_ns, new_id
        self.quota_bytes, self.default_size = quota_bytes, default_size
        self.admit_space = admit_space  # 507 when a new disk would reach into the server's reserve
        self.is_running: Callable[[str], bool] = lambda sandbox_id: False  # set once the manager exists
        self._locks: dict[str, asyncio.Lock] = {}

    # ---- lookups -------------------------------------------------------------------------------
    def _find(self, principal: Principal, volume_id: str) -> Volume:
        volume = self.store.volume(volume_id)
        if volume is None or not principal.sees(volume.team_id):
            raise VolumeNotFoundError()
        return volume

    async def get(self, principal: Principal, volume_id: str) -> Volume:
        return await asyncio.to_thread(self._find, principal, volume_id)

    async def list(self, principal: Principal) -> list[Volume]:
        volumes = await asyncio.to_thread(self.store.volumes)
        return sorted((v for v in volumes if principal.sees(v.team_id)), key=lambda v: (v.created_ns, v.id))

    async def allocated(self, volume: Volume) -> int:
        return await asyncio.to_thread(self.store.allocated, volume.id)

    def _lock(self, volume_id: str) -> asyncio.Lock:
        """Calls that copy or replace one volume's disk go one at a time on this node."""
        return self._locks.setdefault(volume_id, asyncio.Lock())

    # ---- the quota -----------------------------------------------------------------------------
    def usage(self, team_id: str) -> int:
        volumes = [v for v in self.store.volumes() if v.team_id == team_id]
        return team_usage(volumes, [s for v in volumes for s in self.store.snapshots(v.id)])

    def _check_quota(self, team_id: str, extra: int) -> None:
        """Under the store's lock, right before a new disk is placed."""
        used = self.usage(team_id)
        if used + extra > self.quota_bytes:
            raise VolumeQuotaError(f"quota_exceeded: the team's volumes take {used} of {self.quota_bytes} bytes "
                                   f"and this needs {extra} more")

    # ---- volumes -------------------------------------------------------------------------------
    async def create(self, principal: Principal, *, access_mode: str = "RWO", size_bytes: int | None = None,
                     posix: tuple[int, int] = (0, 0), snapshot_id: str | None = None) -> Volume:
        source = None
        size = size_bytes or self.default_size
        if snapshot_id is not None:
            if not snapshot_id.strip():
                raise VolumeRequestError("snapshot_id must not be blank")
            source = await asyncio.to_thread(self._find_snapshot, principal, snapshot_id.strip())
            size = source.volume_size_bytes  # a copy of that disk: its size
        now = self.clock_ns()
        volume = Volume(id=self.new_id(), team_id=principal.team_id, user_id=principal.key_id,
                        access_mode=access_mode, size_bytes=size, created_ns=now, updated_ns=now,
                        default_posix_uid=posix[0], default_posix_gid=posix[1])
        await asyncio.to_thread(self.admit_space)
        with disk_errors("the volume's disk could not be made"):
            await asyncio.to_thread(self.store.create, volume, lambda: self._check_quota(volume.team_id, size),
                                    source_snapshot=(source.volume_id, source.id) if source else None)
        return volume

    def _find_snapshot(self, principal: Principal, snapshot_id: str) -> VolumeSnapshot:
        for volume in self.store.volumes():
            if principal.sees(volume.team_id):
                for snapshot in self.store.snapshots(volume.id):
                    if snapshot.id == snapshot_id:
                        return snapshot
        raise VolumeSnapshotNotFoundError()

    async def fork(self, principal: Principal, volume_id: str, access_mode: str | None = None,
                   posix: tuple[int, int] | None = None) -> Volume:
        """A new volume with a copy of this one's files now (a consistent copy: writes wait for it)."""
        async with self._lock(volume_id):
            source = await self.get(principal, volume_id)
            now = self.clock_ns()
            uid, gid = posix if posix is not None else (source.default_posix_uid, source.default_posix_gid)
            volume = Volume(id=self.new_id(), team_id=source.team_id, user_id=principal.key_id,
                            access_mode=parse_access_mode(access_mode) if access_mode else source.access_mode,
                            size_bytes=source.size_bytes, created_ns=now, updated_ns=now,
                            source_volume_id=source.id, default_posix_uid=uid, default_posix_gid=gid)
            await asyncio.to_thread(self.admit_space)
            with disk_errors("the volume's disk could not be copied"):
                await asyncio.to_thread(self.store.create, volume,
                                        lambda: self._check_quota(volume.team_id, volume.size_bytes),
                                        source_volume=source.id, freeze=self.mounts.frozen)
            return volume

    async def delete(self, principal: Principal, volume_id: str, force: bool = False) -> None:
        """Idempotent for an unknown id; 404 for another team's; 409 while bound unless ``force``."""
        async with self._lock(volume_id):
            await asyncio.to_thread(self._delete, principal, volume_id, force)
        self._locks.pop(volume_id, None)

    def _delete(self, principal: Principal, volume_id: str, force: bool) -> None:
        with self.store.lock():
            volume = self.store.volume(volume_id)
            if volume is None:
                return
            if not principal.sees(volume.team_id):
                raise VolumeNotFoundError()
            if volume.bindings and not force:
                raise VolumeConflictError("volume has active mounts", active_mounts(volume))
            self.store.remove(volume_id)  # the commit point: from here on it does not exist
        if volume.bindings:
            log.warning("sandboxvolume %s deleted with force while bound to %s", volume_id,
                        ", ".join(b.sandbox_id for b in volume.bindings))
        self.mounts.release(volume_id)

    # ---- snapshots -----------------------------------------------------------------------------
    async def create_snapshot(self, principal: Principal, volume_id: str, name: str,
                              description: str) -> VolumeSnapshot:
        async with self._lock(volume_id):
            volume = await self.get(principal, volume_id)
            snapshot = VolumeSnapshot(id=self.new_id(), volume_id=volume.id, team_id=volume.team_id, name=name,
                                      description=description, size_bytes=0, volume_size_bytes=volume.size_bytes,
                                      created_ns=self.clock_ns())
            await asyncio.to_thread(self.admit_space)
            with disk_errors("the volume's disk could not be copied"):
                return await asyncio.to_thread(self.store.create_snapshot, snapshot,
                                               lambda size: self._check_quota(volume.team_id, size),
                                               self.mounts.frozen)

    async def snapshots(self, principal: Principal, volume_id: str) -> list[VolumeSnapshot]:
        await self.get(principal, volume_id)
        found = await asyncio.to_thread(self.store.snapshots, volume_id)
        return sorted(found, key=lambda s: (s.created_ns, s.id))

    async def snapshot(self, principal: Principal, volume_id: str, snapshot_id: str) -> VolumeSnapshot:
        for snapshot in await self.snapshots(principal, volume_id):
            if snapshot.id == snapshot_id:
                return snapshot
        raise VolumeSnapshotNotFoundError()

    async def delete_snapshot(self, principal: Principal, volume_id: str, snapshot_id: str) -> None:
        await self.get(principal, volume_id)

        def remove() -> None:
            with self.store.lock():
                self.store.remove_snapshot(volume_id, snapshot_id)
        async with self._lock(volume_id):
            await asyncio.to_thread(remove)

    async def restore(self, principal: Principal, volume_id: str, snapshot_id: str) -> None:
        """The volume's files become the snapshot's; 409 while a running sandbox has it mounted."""
        async with self._lock(volume_id):
            volume = await self.get(principal, volume_id)
            await self.snapshot(principal, volume_id, snapshot_id)
            live = [b.sandbox_id for b in volume.bindings if self.is_running(b.sandbox_id)]
            if live:
                raise VolumeConflictError(f"sandboxvolume is mounted by a running sandbox ({', '.join(live)}): "
                                          "pause or delete it before a restore", active_mounts(volume))
            await asyncio.to_thread(self.mounts.release, volume_id)
            with disk_errors("the snapshot's disk could not be copied"):
                await asyncio.to_thread(self.store.restore, volume_id, snapshot_id)

    # ---- the file API --------------------------------------------------------------------------
    @asynccontextmanager
    async def files(self, principal: Principal, volume_id: str):
        """The host path of the volume's root, mounted here for as long as the block runs."""
        await self.get(principal, volume_id)
        with disk_errors("the volume's disk could not be mounted"):
            root = await asyncio.to_thread(self.mounts.attach, volume_id)
        try:
            yield root
        finally:
            await asyncio.to_thread(self.mounts.detach, volume_id)

    # ---- bindings (domain.ports.VolumeBindings, for the sandbox manager) -----------------------
    async def bind(self, sandbox_id: str, team_id: str, mounts: list[dict]) -> list[dict]:
        """Record the claim's mounts (all or none); returns them with ``read_only`` set."""
        if not mounts:
            return []
        return await asyncio.to_thread(self._bind, sandbox_id, team_id, mounts)

    def _bind(self, sandbox_id: str, team_id: str, mounts: list[dict]) -> list[dict]:
        now = self.clock_ns()
        with self.store.lock():
            changed: list[Volume] = []
            for mount in mounts:
                volume = self.store.volume(mount["sandboxvolume_id"])
                if volume is None or volume.team_id != team_id:
                    raise VolumeNotFoundError(f"sandboxvolume {mount['sandboxvolume_id']} not found")
                if volume.access_mode == "RWX":
                    raise VolumeRequestError(f"sandboxvolume {volume.id} is RWX, which cannot be mounted here: "
                                             "use RWO (one sandbox) or ROX (read-only, any number)")
                others = [b for b in volume.bindings if b.sandbox_id != sandbox_id]
                if volume.access_mode == "RWO" and others:
                    raise VolumeConflictError(
                        f"sandboxvolume {volume.id} is RWO and already mounted by sandbox {others[0].sandbox_id}",
                        active_mounts(volume))
                read_only = volume.access_mode == "ROX"
                mount["read_only"] = read_only
                volume.bindings = others + [Binding(sandbox_id, mount["mount_point"], read_only, now)]
                changed.append(volume)
            for volume in changed:
                self.store.save(volume)
        return mounts

    async def unbind(self, sandbox_id: str) -> None:
        await asyncio.to_thread(self._drop_bindings, lambda sid: sid == sandbox_id)

    async def reconcile(self, sandboxes: set[str]) -> None:
        """Bindings of sandboxes that do not exist (a server killed during a claim) are dropped."""
        await asyncio.to_thread(self._drop_bindings, lambda sid: sid not in sandboxes)

    def _drop_bindings(self, drop: Callable[[str], bool]) -> None:
        with self.store.lock():
            for volume in self.store.volumes():
                kept = [b for b in volume.bindings if not drop(b.sandbox_id)]
                if len(kept) != len(volume.bindings):
                    volume.bindings = kept
                    self.store.save(volume)


def active_mounts(volume: Volume) -> dict:
    """The reference's 409 details."""
    return {"active_mounts": len(volume.bindings),
            "mounts": [{"sandbox_id": b.sandbox_id, "mount_point": b.mount_point, "mounted_at": rfc3339(b.bound_ns)}
                       for b in volume.bindings],
            "hint": "delete the sandboxes that mount it, or retry with force=true"}

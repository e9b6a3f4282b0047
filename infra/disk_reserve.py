"""The server's own reserve on its data dir's filesystem, shared with every tenant's workspace.

Without per-sandbox quotas a tenant can fill the filesystem that also holds every store; then
every other tenant's inputs, sessions and claims fail (507) and ``/healthz`` says the stores
are unwritable. The server keeps ``reserve`` bytes for its own stores (journals, snapshots,
checkpoints of a pause) and refuses, with 507, what would be written *for a tenant* into it:

- a claim (a new tenant) needs ``CLAIM_ROOM`` above the reserve;
- an upload or a mkdir through the file API is checked before it starts and before each chunk
  (the server writes those as root, so nothing else would stop it);
- the sandboxes' own processes are stopped by the kernel: they run as unprivileged uids, and
  ext2/3/4 keep their reserved blocks (``tune2fs -r`` / ``-m``, 5% by default) for root, which
  is what the server runs as. ``tenant_room`` therefore counts what an unprivileged writer may
  still use (``f_bavail``) and what is left above the reserve of what the server may use
  (``f_bfree`` as root), whichever is smaller. A filesystem that keeps less than the reserve for
  root (tmpfs, xfs, btrfs have no such blocks) lets sandbox processes fill it past the reserve:
  the server says so at start; the remedy there is per-sandbox quotas.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from session_supervisor.domain.model.errors import InsufficientStorageError

log = logging.getLogger(__name__)

DEFAULT_RESERVE = 64 << 20
CLAIM_ROOM = 16 << 20  # a new sandbox must have at least this much to start in


@dataclass(frozen=True)
class DiskReserve:
    path: str                  # on the data dir's filesystem
    reserve: int = DEFAULT_RESERVE

    def _stats(self) -> tuple[int, int]:
        """(bytes the server may still write, bytes an unprivileged writer may still write)."""
        stats = os.statvfs(self.path)
        unprivileged = stats.f_bavail * stats.f_frsize
        server = stats.f_bfree * stats.f_frsize if os.geteuid() == 0 else unprivileged
        return server, unprivileged

    def tenant_room(self) -> int:
        """Bytes a tenant may still have written, by itself or through the server."""
        server, unprivileged = self._stats()
        return max(0, min(unprivileged, server - self.reserve))

    def admit(self, needed: int = 1, what: str = "this write") -> None:
        """507 unless ``needed`` bytes for a tenant fit above the server's reserve."""
        if not self.reserve and needed <= 1:
            return
        room = self.tenant_room()
        if room < needed:
            raise InsufficientStorageError(
                f"not enough free space for {what}: {room} bytes left for tenants above the server's "
                f"reserve of {self.reserve} bytes, {needed} needed")

    def kept_for_root(self) -> int:
        """What the filesystem keeps for root alone right now (its reserved blocks, up to what is free)."""
        server, unprivileged = self._stats()
        return server - unprivileged

    def startup_check(self, sandboxes_unprivileged: bool) -> str | None:
        """A warning when sandbox processes could write into the reserve; None when they cannot."""
        if not self.reserve:
            return None
        if not sandboxes_unprivileged:
            return (f"sandbox processes run as the server's own user: nothing stops them from writing into "
                    f"the server's disk reserve of {self.reserve} bytes on {self.path}")
        kept = self.kept_for_root()
        if kept < self.reserve:
            return (f"the filesystem of {self.path} keeps {kept} bytes for root, less than the server's disk "
                    f"reserve of {self.reserve}: sandbox processes can fill it past the reserve (on ext4: "
                    f"`tune2fs -r` to reserve more for root; otherwise per-sandbox quotas)")
        return None

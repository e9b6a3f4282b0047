"""This node's leases: the ``SandboxOwnership`` port over the lease table (``infra.leases``).

The node keeps the leases it holds in memory, with when each was last renewed on its own
monotonic clock: a process is started only while that is recent (``fresh``), and every
journal commit is fenced by the lease's epoch in the database (``pg_journal``). Expiry is
judged by the database clock, never by a node's.

A user's pause releases the lease (any node may resume the sandbox). A clean shutdown keeps
it in this node's name and only stops renewing it: the node finds it again when it restarts
(``held_before``), and if it never does, the lease expires and a live node's sweep takes the
sandbox over (``orphans``), as for a node that died.
"""
from __future__ import annotations

import logging
import threading
import time

from session_supervisor.domain.ports import Whereabouts

from .leases import Lease, Leases

log = logging.getLogger(__name__)
FRESH_SHARE = 0.8  # of the lease: past it (no renewal seen) this node starts nothing more


class LeaseOwnership:
    clustered = True

    def __init__(self, leases: Leases, node_id: str, url: str, lease_seconds: float) -> None:
        self.leases = leases
        self.node_id = node_id
        self.url = url
        self.lease_seconds = lease_seconds
        self._held: dict[str, tuple[Lease, float]] = {}  # sandbox id -> (lease, monotonic renewal)
        self._lock = threading.Lock()

    def lease(self, sandbox_id: str) -> Lease | None:
        """The fencing token of a sandbox this node holds (None: it may not write)."""
        with self._lock:
            held = self._held.get(sandbox_id)
        return held[0] if held is not None else None

    def _keep(self, lease: Lease, renewed_at: float) -> None:
        with self._lock:
            self._held[lease.sandbox_id] = (lease, renewed_at)

    def _drop(self, sandbox_id: str) -> Lease | None:
        with self._lock:
            held = self._held.pop(sandbox_id, None)
        return held[0] if held is not None else None

    # ---- the port ---------------------------------------------------------------------------
    def whereabouts(self, sandbox_id: str) -> Whereabouts:
        owner = self.leases.owner(sandbox_id)
        if owner is None:
            return Whereabouts(exists=False)
        if owner.node_id is not None and not owner.expired and owner.node_id != self.node_id:
            return Whereabouts(exists=True, owner_url=owner.url)
        return Whereabouts(exists=True, last_owner_here=owner.node_id == self.node_id)

    def acquire(self, sandbox_id: str) -> bool:
        started = time.monotonic()
        lease = self.leases.acquire(sandbox_id, self.node_id, self.url, self.lease_seconds, reclaim_own=True)
        if lease is None:
            return False
        self._keep(lease, started)
        return True

    def release(self, sandbox_id: str, keep_running: bool) -> None:
        lease = self._drop(sandbox_id)
        if lease is not None and not keep_running:
            self.leases.release(lease)

    def forget(self, sandbox_id: str) -> None:
        lease = self._drop(sandbox_id)
        if lease is None:  # a paused sandbox: nobody holds it; take it to delete its row
            lease = self.leases.acquire(sandbox_id, self.node_id, self.url, self.lease_seconds, reclaim_own=True)
        if lease is not None and not self.leases.delete(lease):
            log.warning("sandbox %s: its lease row was taken before it could be deleted", sandbox_id)

    def renew(self) -> list[str]:
        with self._lock:
            held = list(self._held.values())
        lost = []
        for lease, _renewed in held:
            started = time.monotonic()
            renewed = self.leases.renew(lease, self.lease_seconds)
            if renewed is None:
                self._drop(lease.sandbox_id)
                lost.append(lease.sandbox_id)
            else:
                self._keep(renewed, started)
        return lost

    def fresh(self, sandbox_id: str) -> bool:
        with self._lock:
            held = self._held.get(sandbox_id)
        return held is not None and time.monotonic() - held[1] < self.lease_seconds * FRESH_SHARE

    def held_before(self) -> list[str]:
        return [owner.sandbox_id for owner in self.leases.held_by(self.node_id)]

    def orphans(self) -> list[str]:
        return [owner.sandbox_id for owner in self.leases.expired() if owner.node_id != self.node_id]

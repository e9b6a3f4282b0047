"""Which node runs which sandbox (``manager.placement``), when there is more than one node.

A sandbox runs on exactly one node: the one holding its lease (``SandboxOwnership``). A call
for a sandbox is served where it runs; ``locate`` says whether that is here (None) or another
node (its URL, and the API forwards the call there). A sandbox nobody runs (paused, or its
node died and its lease expired) is adopted by the node that gets the next call for it: a
paused one is parked here (resumed as usual), one that was running is taken over as a runtime
replacement (generation + 1, unfinished attempts ``runtime_replaced``, recovery per policy),
with the workspace of its last checkpoint. A sweep does the same, without a call, for a dead
node's sandboxes that were running.

Leases are renewed every third of their length. A lease lost (another node took the sandbox
over) ends the runtime here at once, without recording anything more: the new owner's epoch
fences every commit of this node, and no process is started here without a fresh lease.
On one machine ``SoleOwner`` says every sandbox is this node's, and none of this runs.
"""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from .model.errors import UnavailableError
from .ports import SandboxOwnership, Whereabouts
from .sandbox_registry import Retirement
from .task_owner import TaskOwner

if TYPE_CHECKING:
    from .runtime_transitions import RuntimeTransitions
    from .sandbox_registry import SandboxRegistry

log = logging.getLogger(__name__)


class SoleOwner:
    """One machine: every sandbox there is is this node's."""

    clustered = False

    def whereabouts(self, sandbox_id: str) -> Whereabouts:
        return Whereabouts(exists=True, last_owner_here=True)

    def acquire(self, sandbox_id: str) -> bool:
        return True

    def release(self, sandbox_id: str, keep_running: bool) -> None:
        pass

    def forget(self, sandbox_id: str) -> None:
        pass

    def renew(self) -> list[str]:
        return []

    def fresh(self, sandbox_id: str) -> bool:
        return True

    def held_before(self) -> list[str]:
        return []

    def orphans(self) -> list[str]:
        return []


def lease_fence(ownership: SandboxOwnership):
    """Before a process starts: only while this node's lease is fresh (a node cut off from the
    database must not start processes for a sandbox another node may be taking over)."""
    def fence(sandbox_id: str) -> None:
        if not ownership.fresh(sandbox_id):
            raise UnavailableError("this node's lease on the sandbox is not current; no process is started")
    return fence


class Placement:
    def __init__(self, registry: SandboxRegistry, transitions: RuntimeTransitions, ownership: SandboxOwnership,
                 lease_seconds: float) -> None:
        self.registry = registry
        self.transitions = transitions
        self.ownership = ownership
        self.lease_seconds = lease_seconds
        self._tasks = TaskOwner("sandbox placement")
        self.lease_error = ""  # why the last renewal round failed ("" while they succeed): /healthz

    @property
    def clustered(self) -> bool:
        return self.ownership.clustered

    # ---- calls ----------------------------------------------------------------------------------
    async def locate(self, sandbox_id: str) -> str | None:
        """Where a call for this sandbox is served: None here, else the owner's URL."""
        if not self.clustered or sandbox_id in self.registry.running:
            return None
        where = await asyncio.to_thread(self.ownership.whereabouts, sandbox_id)
        if where.owner_url is not None or not where.exists:
            self.registry.forget_stale(sandbox_id)  # what this node knew of it is stale
            return where.owner_url
        return await self.transitions.adopt(sandbox_id, where)

    # ---- leases over time ----------------------------------------------------------------------
    def start(self) -> None:
        if self.clustered:
            self._tasks.every(self.lease_seconds / 3, self._keep_leases, "lease renewal")

    async def stop(self) -> None:
        await self._tasks.close()

    async def _keep_leases(self) -> None:
        try:  # renew what this node runs; look for a dead node's sandboxes
            lost = await asyncio.to_thread(self.ownership.renew)
            orphans = await asyncio.to_thread(self.ownership.orphans)
        except Exception as exc:  # the database may be away for a while: the next round retries
            if not self.lease_error:
                log.exception("renewing sandbox leases failed")
            self.lease_error = f"cannot renew leases: {exc}"
            return
        self.lease_error = ""
        for sandbox_id in lost:
            await self._lost(sandbox_id)
        await self._adopt(orphans)

    async def _lost(self, sandbox_id: str) -> None:
        """Another node runs this sandbox now: end the runtime here, recording nothing more."""
        if sandbox_id not in self.registry.running:
            return
        log.warning("sandbox %s: its lease was taken over by another node; ending its runtime here", sandbox_id)
        await self.registry.retire(sandbox_id, Retirement.HANDED_OVER)

    async def _adopt(self, orphans: list[str]) -> None:
        """A dead node's running sandboxes come back on a live one without waiting for a call."""
        for sandbox_id in orphans:
            try:
                await self.locate(sandbox_id)
            except Exception:
                log.exception("sandbox %s: taking it over failed; the next sweep retries", sandbox_id)

"""Sandbox deadlines and the shutdown checkpoint (``manager.deadlines``).

Past ``hard_expires_at`` a sandbox is deleted, even when paused; past ``expires_at`` a running
one is paused (an automatic pause, which a runtime call cancels). A clean shutdown pauses every
running sandbox through the same hook, so the next start (on any node) finds checkpoints.
"""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from .model.errors import SandboxNotFoundError
from .ports import Clock
from .task_owner import TaskOwner

if TYPE_CHECKING:
    from .runtime_transitions import RuntimeTransitions
    from .sandbox_registry import SandboxRegistry

log = logging.getLogger(__name__)

SWEEP_S = 1.0          # ttl and hard_ttl deadlines are enforced within about a second
SHUTDOWN_DRAIN_S = 1.0  # at shutdown the HTTP server has already finished its requests


class Deadlines:
    def __init__(self, registry: SandboxRegistry, transitions: RuntimeTransitions, clock: Clock) -> None:
        self.registry = registry
        self.transitions = transitions
        self.clock = clock
        self._tasks = TaskOwner("sandbox deadlines")

    # ---- ttl and hard_ttl ----------------------------------------------------------------------
    def start(self) -> None:
        self._tasks.every(SWEEP_S, self.sweep, "the ttl sweep", self.clock.sleep)

    async def sweep(self) -> None:
        """Past ``hard_expires_at``: deleted, even when paused. Past ``expires_at``: paused."""
        now = self.clock.now_ns()
        due = []
        for sandbox in self.registry.list():
            if sandbox.hard_expires_ns and now >= sandbox.hard_expires_ns:
                due.append(self.transitions.delete(sandbox.id))
            elif sandbox.id in self.registry.running and sandbox.expires_ns and now >= sandbox.expires_ns:
                due.append(self.transitions.pause(sandbox.id, automatic=True))
        for outcome in await asyncio.gather(*due, return_exceptions=True):
            if isinstance(outcome, BaseException) and not isinstance(outcome, SandboxNotFoundError):
                log.error("sandbox deadline sweep failed", exc_info=outcome)

    # ---- shutdown -------------------------------------------------------------------------------
    async def checkpoint_all(self) -> None:
        """A clean shutdown pauses every running sandbox through the same hook."""
        await self._tasks.close()
        await asyncio.gather(*(self._checkpoint_for_shutdown(sid) for sid in list(self.registry.running)))

    async def _checkpoint_for_shutdown(self, sandbox_id: str) -> None:
        try:
            await self.transitions.pause(sandbox_id, by_user=False, drain_s=SHUTDOWN_DRAIN_S)
        except Exception:  # left running: shutdown() ends it, the next start replaces it
            log.exception("sandbox %s could not be checkpointed at shutdown", sandbox_id)

"""Session expiry (``idle_timeout_seconds``, ``max_lifetime_seconds``), enforced within about a second.

The reference sweeps every 30 s; the decisions for this project ask for about 1 s. One
sweep task per sandbox runtime looks at every session a few times a second on the
injected clock (so a fake clock drives it in scenarios). The decision is the pure
``expiry_due``; the action, ``SessionLifecycle.expire_session``, runs in its own task per
session so that one slow stop (a long grace period) never holds up another's expiry.
"""
from __future__ import annotations

import asyncio
import logging

from .model.policies import expiry_due
from .ports import ExpiryHost

log = logging.getLogger(__name__)

SWEEP_INTERVAL_S = 0.25


class ExpirySweep:
    """Runs while the runtime is active and at least one session has an idle timeout or a lifetime
    (most have neither: a sandbox without such sessions costs no wake-ups at all)."""

    def __init__(self, host: ExpiryHost) -> None:
        self.host = host
        self._active = False
        self._loop: asyncio.Task | None = None

    @property
    def running(self) -> bool:
        """Whether it sweeps (its loop runs only while some session may expire)."""
        return self._active

    def _looping(self) -> bool:
        return self._loop is not None and not self._loop.done()

    def start(self) -> None:
        """Begin sweeping (idempotent). Call on the event loop once the runtime is active."""
        self._active = True
        self.notice()

    def stop(self) -> None:
        """Stop sweeping. Expiries already started finish: their stop is already journaled."""
        self._active = False
        loop, self._loop = self._loop, None
        if loop is not None:
            loop.cancel()

    def notice(self) -> None:
        """A session was created or its spec changed: sweep if it may expire."""
        if self._active and not self._looping() and self._any_expires():
            self._loop = self.host.tasks.spawn(self._run(), "the expiry sweep")

    def _any_expires(self) -> bool:
        return any(live.aggregate.settings.lifecycle.expires for live in self.host.store.live.values())

    async def _run(self) -> None:
        while self._any_expires():
            await self.host.clock.sleep(SWEEP_INTERVAL_S)
            self.sweep()
        self._loop = None

    def due(self) -> list[str]:
        now = self.host.clock.now_ns()
        return [live.id for live in self.host.store.live.values()
                if live.expiring is None and (s := live.aggregate).desired_state == "running"
                and s.settings.lifecycle.expires
                and expiry_due(s.spec["lifecycle"], s.created_ns, s.last_activity_ns, now)]

    def sweep(self) -> None:
        for session_id in self.due():
            live = self.host.store.live[session_id]
            live.expiring = self.host.tasks.spawn(self._expire(live), f"expiry of {session_id}")

    async def _expire(self, live) -> None:
        try:
            await self.host.expire_session(live.id)
        finally:
            if live.expiring is asyncio.current_task():
                live.expiring = None

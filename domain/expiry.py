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
    def __init__(self, host: ExpiryHost) -> None:
        self.host = host
        self._task: asyncio.Task | None = None
        self._expiring: dict[str, asyncio.Task] = {}  # session id -> its expiry in progress

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Begin sweeping (idempotent). Call on the event loop once the runtime is active."""
        if not self.running:
            self._task = asyncio.get_running_loop().create_task(self._run())
            self._task.add_done_callback(_log_failure)

    def stop(self) -> None:
        """Stop sweeping. Expiries already started finish: their stop is already journaled."""
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _run(self) -> None:
        while True:
            await self.host.clock.sleep(SWEEP_INTERVAL_S)
            self.sweep()

    def due(self) -> list[str]:
        now = self.host.clock.now_ns()
        return [s.id for s in self.host.list_sessions()
                if s.desired_state == "running" and s.id not in self._expiring
                and expiry_due(s.spec["lifecycle"], s.created_ns, s.last_activity_ns, now)]

    def sweep(self) -> None:
        loop = asyncio.get_running_loop()
        for session_id in self.due():
            task = loop.create_task(self.host.expire_session(session_id))
            self._expiring[session_id] = task
            task.add_done_callback(lambda t, sid=session_id: self._finished(sid, t))

    def _finished(self, session_id: str, task: asyncio.Task) -> None:
        if self._expiring.get(session_id) is task:
            del self._expiring[session_id]
        _log_failure(task)


def _log_failure(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("session expiry failed", exc_info=task.exception())

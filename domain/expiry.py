"""Session expiry (``idle_timeout_seconds``, ``max_lifetime_seconds``), enforced within about a second.

The reference sweeps every 30 s; the decisions for this project ask for about 1 s. Each
active runtime's sessions are looked at a few times a second on the injected clock (so a
fake clock drives it in scenarios), by one task per clock and event loop for every runtime:
a task per runtime woke 4,000 times a second with a thousand sandboxes live, a cost of the
idle server that grew with their number. The decision is the pure ``expiry_due``; the
action, ``SessionLifecycle.expire_session``, runs in its own task per session so that one
slow stop (a long grace period) never holds up another's expiry.
"""
from __future__ import annotations

import asyncio
import logging
import weakref

from .model.policies import expiry_due
from .ports import Clock, ExpiryHost

log = logging.getLogger(__name__)

SWEEP_INTERVAL_S = 0.25


class _Ticker:
    """Sweeps every registered runtime of one clock, on one event loop, every interval."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.sweeps: dict[ExpirySweep, None] = {}  # in start order
        self.task: asyncio.Task | None = None

    def add(self, sweep: ExpirySweep) -> None:
        self.sweeps[sweep] = None
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self._run())
            self.task.add_done_callback(_log_failure)

    def discard(self, sweep: ExpirySweep) -> None:
        self.sweeps.pop(sweep, None)
        if not self.sweeps and self.task is not None:
            self.task.cancel()
            self.task = None

    async def _run(self) -> None:
        while True:
            await self.clock.sleep(SWEEP_INTERVAL_S)
            for sweep in list(self.sweeps):
                if sweep in self.sweeps:  # not stopped by an earlier one's expiry
                    try:
                        sweep.sweep()
                    except Exception:
                        log.exception("session expiry sweep failed")


# event loop -> clock -> its ticker (tests run several loops, scenarios several fake clocks)
_tickers: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _ticker(clock: Clock) -> _Ticker:
    per_loop = _tickers.setdefault(asyncio.get_running_loop(), {})
    if id(clock) not in per_loop or per_loop[id(clock)].clock is not clock:
        per_loop[id(clock)] = _Ticker(clock)
    return per_loop[id(clock)]


class ExpirySweep:
    def __init__(self, host: ExpiryHost) -> None:
        self.host = host
        self._ticker: _Ticker | None = None
        self._expiring: dict[str, asyncio.Task] = {}  # session id -> its expiry in progress

    @property
    def running(self) -> bool:
        return self._ticker is not None

    def start(self) -> None:
        """Begin sweeping (idempotent). Call on the event loop once the runtime is active."""
        if not self.running:
            self._ticker = _ticker(self.host.clock)
            self._ticker.add(self)

    def stop(self) -> None:
        """Stop sweeping. Expiries already started finish: their stop is already journaled."""
        if self._ticker is not None:
            self._ticker.discard(self)
            self._ticker = None

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

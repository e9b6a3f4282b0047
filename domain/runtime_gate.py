"""The per-sandbox gate in front of its runtime: the pause barrier and auto-resume.

One ``RuntimeGate`` per sandbox, running or parked: its lock orders pause, resume and config
changes; its barrier turns new mutating calls away while a pause hook runs; it counts the
admitted calls still running so the barrier can wait for them (``Ticket``).
"""
from __future__ import annotations

import asyncio
import weakref
from functools import partial
from typing import Callable


class Ticket:
    """One admitted session call; released once, by the response or when the request is freed."""

    __slots__ = ("_leave", "_open", "__weakref__")

    def __init__(self, leave: Callable[[], None]) -> None:
        self._leave, self._open = leave, True  # the gate's count of this call, given back

    def release(self) -> None:
        if self._open:
            self._open = False
            self._leave()

    def bind(self, lifetime: object) -> None:
        """Release when ``lifetime`` (the request, any weak-referenceable object) is freed:
        a handler cancelled by a client disconnect never sees its response middleware."""
        weakref.finalize(lifetime, self.release)


class RuntimeGate:
    """Per-sandbox lifecycle lock, pause barrier, and count of admitted calls still running."""

    def __init__(self) -> None:
        self.lock = asyncio.Lock()  # held by the one lifecycle transition running (RuntimeTransitions.exclusive)
        self.busy: str | None = None  # what holds it: "pause", "resume", ... (named in a 503)
        self.barrier = False
        self.sealing = False      # past the point of no return: callers wait for the pause to end
        self.automatic = False    # the barrier belongs to a ttl pause, which access cancels
        self.cancel_requested = False
        self.inflight = {True: 0, False: 0}  # mutating -> admitted calls still running
        self._changed = asyncio.Event()

    def raise_barrier(self, automatic: bool) -> None:
        self.barrier, self.automatic, self.cancel_requested, self.sealing = True, automatic, False, False

    def lower_barrier(self) -> None:
        self.barrier = self.automatic = self.cancel_requested = self.sealing = False

    def enter(self, mutating: bool) -> Ticket:
        self.inflight[mutating] += 1
        return Ticket(partial(self.leave, mutating))

    def leave(self, mutating: bool) -> None:
        self.inflight[mutating] -= 1
        self._changed.set()

    async def drain(self, timeout: float, reads_too: bool) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.inflight[True] or (reads_too and self.inflight[False]):
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except asyncio.TimeoutError:
                return False
        return True

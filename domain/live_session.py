"""LiveSession: everything a running sandbox holds for one session, in one object.

The aggregate (the session as its journal has it, ahead of the writer), what the API shows of it
(as of its last committed event), its lifecycle lock, its live attempt, its restart timer and
expiry, its retention marks and the journal page read ahead for it. The sandbox's store keeps one
``LiveSession`` per session id; deleting a session pops that one object and ``close`` ends what
it holds, so no part of the runtime keeps a map of its own to clean up.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .model.session import Session, SessionView

if TYPE_CHECKING:
    from .live_attempt import LiveAttempt
    from .page_read_ahead import AheadPage


@dataclass
class RetentionMarks:
    """Where the session's journal stands against its retention (``domain.retention``)."""

    snapped: tuple[int, int] = (0, 0)  # (version, journal_bytes) at its last snapshot
    deleted_through: int = 0  # rows up to this seq are deleted (this run)
    unpurged: int = 0  # logical bytes trimmed but not yet deleted
    due_at: float | None = None  # loop time its checkpoint is due


class LiveSession:
    __slots__ = ("aggregate", "lock", "attempt", "restart_timer", "expiring", "creating", "deleting",
                 "committed_seq", "view", "retention", "read_ahead")

    def __init__(self, aggregate: Session, committed: bool) -> None:
        self.aggregate = aggregate
        # Lifecycle calls on one session (and its restart timer and expiry) go one at a time, so a
        # stop and a start never interleave into two live attempts; reads and inputs never wait.
        self.lock = asyncio.Lock()
        self.attempt: LiveAttempt | None = None  # the running attempt: process, input queue, pump
        self.restart_timer: asyncio.Task | None = None  # a backoff's restart, armed after an exit
        self.expiring: asyncio.Task | None = None  # its expiry (idle or lifetime) in progress
        self.creating: asyncio.Event | None = None  # set once its create is done (a replay waits)
        self.deleting = False  # a delete is stopping it: calls answer 404 from now on
        self.committed_seq = aggregate.version if committed else 0
        self.view: SessionView | None = aggregate.view() if committed else None  # None until committed
        self.retention = RetentionMarks(snapped=(aggregate.version, getattr(aggregate, "journal_bytes", 0))
                                        if committed else (0, 0))
        self.read_ahead: AheadPage | None = None  # the next journal page, read while the client reads

    @property
    def id(self) -> str:
        return self.aggregate.id

    def cancel_restart(self) -> None:
        timer, self.restart_timer = self.restart_timer, None
        if timer is not None and timer is not asyncio.current_task():
            timer.cancel()

    def close(self) -> None:
        """The session is gone from its runtime: no timer, expiry or read-ahead of it goes on."""
        self.cancel_restart()
        expiring, self.expiring = self.expiring, None
        if expiring is not None and expiring is not asyncio.current_task():
            expiring.cancel()
        if self.read_ahead is not None:
            self.read_ahead.cancel()
            self.read_ahead = None
        self.attempt = None

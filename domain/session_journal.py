"""The read side of a sandbox's sessions: journal pages, stream replay, audit views.

One per SandboxRuntime (``runtime.journal``), given the store, the hub, the retention and the
session lookup it reads through. Reads run in worker threads; cursors are checked against the
retained window first.
"""
from __future__ import annotations

import asyncio
from typing import Callable

from .hub import Hub, Subscriber
from .page_read_ahead import PageReadAhead, Render
from .model.errors import CursorExpiredError, InvalidRequestError
from .model.session import Session
from .retention import Retention
from .sandbox_store import ReadAheadSlots, SandboxStore


class SessionJournal:
    def __init__(self, store: SandboxStore, hub: Hub, retention: Retention,
                 session: Callable[[str], Session]) -> None:
        self.store = store
        self.hub = hub
        self.retention = retention
        self.session = session  # by id; SessionNotFoundError (404) for an unknown one
        self.read_ahead = PageReadAhead(store.read_raw, ReadAheadSlots(store))

    def cursor(self, session: Session) -> tuple[int, int]:
        return session.earliest_seq, self.store.committed_seq.get(session.id, 0)

    def check_cursor(self, session: Session, after: int) -> tuple[int, int]:
        earliest, latest = self.cursor(session)
        if after > latest:
            raise InvalidRequestError(f"event cursor must not be greater than latest sequence {latest}")
        if earliest > 1 and after < earliest - 1:
            raise CursorExpiredError(earliest, latest)
        return earliest, latest

    # ---- journal ---------------------------------------------------------------------------
    async def events_page(self, session_id: str, after: int, limit: int, render: Render):
        """A page of events after ``after`` as ``render`` makes it (the API's wire form, with the
        seq of the last row read), and the cursor. Read in a worker thread, and the next page
        read ahead for a client paging on."""
        session = self.session(session_id)
        self.retention.trim(session)
        earliest, latest = self.check_cursor(session, after)
        events = await self.read_ahead.page(session_id, after, latest, limit, False, render)
        self._still_retained(session, after)
        return events, (earliest, latest)

    def _still_retained(self, session: Session, after: int) -> None:
        """A trim that passed ``after`` while the page was read may have deleted part of it:
        never serve a page with a silent hole (rows are deleted only below earliest)."""
        earliest = session.earliest_seq
        if after < earliest - 1:
            raise CursorExpiredError(earliest, self.store.committed_seq.get(session.id, 0))

    def subscribe(self, session_id: str, after: int) -> tuple[Subscriber, int]:
        """Snapshot-and-subscribe atomically: replay (after, upto] then live events > upto."""
        session = self.session(session_id)
        self.retention.trim(session)
        _earliest, latest = self.check_cursor(session, after)
        return self.hub.subscribe(session_id), latest

    async def replay(self, session_id: str, after: int, upto: int, render: Render, page: int = 1000):
        """One page of a stream's replay (as ``events_page``); CursorExpiredError if trimming overtook it."""
        session = self.session(session_id)
        events = await self.read_ahead.page(session_id, after, upto, page, False, render)
        self._still_retained(session, after)
        return events

    # ---- audit views: the full attempt history, never trimmed while the session exists ---------
    def attempts(self, session_id: str) -> list[dict]:
        """Every attempt as committed: an attempt begun or ended after the last commit is
        shown as the journal has it (the live aggregate runs ahead of the writer)."""
        session = self.session(session_id)
        view = self.store.view(session)
        if view is None or view.attempt is None:
            return []
        number = view.attempt["number"]
        return [*(dict(a) for a in session.attempts[:number - 1]), view.attempt]

    async def history_page(self, session_id: str, after: int, limit: int, render: Render):
        """Lifecycle events only (``session.*``, ``attempt.*``), from seq 1 whatever was trimmed."""
        self.session(session_id)  # 404 for an unknown session
        latest = self.store.committed_seq.get(session_id, 0)
        if after > latest:
            raise InvalidRequestError(f"event cursor must not be greater than latest sequence {latest}")
        events = await self.read_ahead.page(session_id, after, latest, limit, True, render)
        return events, (1, latest)

    async def output_tail(self, session_id: str, upto: int, min_bytes: int) -> list[tuple[str, bytes]]:
        """The latest retained output up to seq ``upto``, oldest first, as (stream, bytes).

        Whole output events are returned, newest backwards until at least ``min_bytes``
        are collected (or the retained journal is exhausted): an AeroLVM log / replay window.
        """
        floor = self.session(session_id).earliest_seq - 1
        return await asyncio.to_thread(self.store.read_output_tail, session_id, floor, upto, min_bytes)

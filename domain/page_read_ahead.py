"""Read-ahead for clients paging through a journal (the replay rate).

A client catching up (an auditor, a reconnecting consumer, the SDK's paged reads) asks for
``after = the last seq it got`` again and again. Between two of its requests the server sat
idle while the client received and parsed the page: measured on 124k small events, the
server spent 4 µs an event rendering and the client 1.6 µs taking it in, one after the other.
So when a page comes back full and more is committed, the next page is read (in a worker
thread, as every read) while the client takes this one in, and handed out if the client asks
for exactly that page next.

Committed events never change, so a page read ahead is what a read at request time would
give, except for events committed since: those are read then and appended (never more than
``limit``). The caller re-checks the retained window after taking a page, as after any read.
Bounded: one page ahead per session, only after a page under PAGE_BYTES, at most
BUDGET_BYTES (counted by the size of the page before each) held for all the sandbox's
sessions, dropped after KEEP_S or when the session asks for another page.
"""
from __future__ import annotations

import asyncio
from typing import Callable, Protocol

from .ports import PublicJson

PAGE_BYTES = 8 * 1024 * 1024  # a bigger page is not read ahead: it would hold that much more memory
KEEP_S = 5.0  # a page nobody asked for is dropped after this long
BUDGET_BYTES = 32 * 1024 * 1024  # read ahead for all of a sandbox's sessions at once

# (session id, after, upto, limit, lifecycle only) -> rows (or, without a render, the page itself)
Reader = Callable[[str, int, int, int, bool], object]
# (session id, rows) -> (events as JSON, seq of the last row read): the API's wire form
Render = Callable[[str, object], tuple[list[PublicJson], int]]


class AheadPage:
    """The next page one session will probably ask for, being read (or read)."""

    __slots__ = ("release", "key", "upto", "future", "expiry", "size")

    def __init__(self, release: Callable[[int], None], key: tuple, upto: int, future: asyncio.Future,
                 expiry: asyncio.TimerHandle, size: int) -> None:
        self.release = release  # gives its bytes back to the sandbox's budget
        self.key = key
        self.upto = upto
        self.future = future
        self.expiry = expiry
        self.size = size  # what it is expected to hold: the size of the page before it

    def cancel(self) -> None:
        """Not wanted any more: its timer stops and its bytes leave the sandbox's budget."""
        self.expiry.cancel()
        self.release(self.size)


class Slots(Protocol):
    """Where each session's page read ahead is kept (``LiveSession.read_ahead`` in a runtime)."""

    def get(self, session_id: str) -> AheadPage | None: ...
    def pop(self, session_id: str, default: None = None) -> AheadPage | None: ...
    def __setitem__(self, session_id: str, ahead: AheadPage) -> None: ...


class PageReadAhead:
    def __init__(self, read: Reader, slots: Slots | None = None) -> None:
        self._read = read
        # session id -> the next page it will probably ask for (a dict of its own when used alone)
        self._ahead: Slots = slots if slots is not None else {}
        self._held = 0  # bytes expected in what is read ahead now

    async def page(self, session_id: str, after: int, upto: int, limit: int,
                   lifecycle_only: bool = False, render: Render | None = None) -> tuple[list[PublicJson], int]:
        """Events in (after, upto], at most ``limit``: read ahead when it was, else read now;
        then the page after it is read ahead when this one was full and more is committed.
        ``render``: what the reader's rows become (the API's wire form), in the same thread."""
        key = (after, limit, lifecycle_only, render)
        ahead = self._take(session_id)
        read = await _result(ahead.future) if ahead is not None and ahead.key == key and ahead.upto <= upto else None
        if read is None:
            events, last = await asyncio.to_thread(self._fetch, session_id, after, upto, limit, lifecycle_only, render)
        else:
            events, last = read
            if len(events) < limit and upto > ahead.upto:  # it read to its end: add what came since
                more, more_last = await asyncio.to_thread(self._fetch, session_id, ahead.upto, upto,
                                                          limit - len(events), lifecycle_only, render)
                events, last = events + more, more_last or last
        if len(events) == limit and last < upto:
            size = sum(len(json) for _s, _k, json in events)
            if size <= PAGE_BYTES and self._held + size <= BUDGET_BYTES:
                self._start(session_id, (last, limit, lifecycle_only, render), upto, size)
        return events, last

    def _fetch(self, session_id: str, after: int, upto: int, limit: int, lifecycle_only: bool,
               render: Render | None):
        rows = self._read(session_id, after, upto, limit, lifecycle_only)
        return rows if render is None else render(session_id, rows)

    def _give_back(self, size: int) -> None:
        self._held -= size

    def drop(self, session_id: str) -> None:
        """Forget what was read ahead for a session (it was deleted)."""
        self._take(session_id)

    def _take(self, session_id: str) -> AheadPage | None:
        ahead = self._ahead.pop(session_id, None)
        if ahead is not None:
            ahead.cancel()
        return ahead

    def _start(self, session_id: str, key: tuple, upto: int, size: int) -> None:
        after, limit, lifecycle_only, render = key
        loop = asyncio.get_running_loop()
        future = asyncio.ensure_future(asyncio.to_thread(self._fetch, session_id, after, upto, limit,
                                                         lifecycle_only, render))
        future.add_done_callback(_retrieve)  # a read refused (store closed) is simply not used
        expiry = loop.call_later(KEEP_S, self._expire, session_id, future)
        self._ahead[session_id] = AheadPage(self._give_back, key, upto, future, expiry, size)
        self._held += size

    def _expire(self, session_id: str, future: asyncio.Future) -> None:
        ahead = self._ahead.get(session_id)
        if ahead is not None and ahead.future is future:
            self._take(session_id)


async def _result(future: asyncio.Future):
    """What a read ahead gave, or None when it failed (the caller reads again, and gets the
    error itself if there still is one)."""
    try:
        return await future
    except Exception:
        return None


def _retrieve(future: asyncio.Future) -> None:
    if not future.cancelled():
        future.exception()

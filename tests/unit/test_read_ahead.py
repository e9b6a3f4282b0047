"""Read-ahead for paging clients (domain.page_read_ahead): whatever it read ahead, a client gets
exactly the pages a read at request time would give, and nothing is held for long."""
from __future__ import annotations

import asyncio

import pytest

from session_supervisor.domain import page_read_ahead as read_ahead
from session_supervisor.domain.page_read_ahead import PageReadAhead


class Journal:
    """A session's committed events in memory, read as the store reads them."""

    def __init__(self, count: int, size: int = 10) -> None:
        self.size = size
        self.latest = 0
        self.reads: list[tuple] = []
        self.asked: list[tuple] = []  # (after, reads started by then) at each request
        self.fail = False
        self.commit(count)

    def commit(self, count: int) -> None:
        self.latest += count

    def read(self, session_id, after, upto, limit, lifecycle_only):
        self.reads.append((after, upto, limit))
        if self.fail:
            raise OSError("store closed")
        seqs = range(after + 1, min(upto, after + limit) + 1)
        return [(seq, "output", b"x" * self.size) for seq in seqs], seqs[-1] if seqs else 0

    def fresh(self, after, limit):
        """The page a read at request time gives."""
        return self.read("s", after, self.latest, limit, False)


def page_through(ahead: PageReadAhead, journal: Journal, limit: int, between=lambda: None) -> list[list[int]]:
    async def body():
        pages, after = [], 0
        while after < journal.latest:
            journal.asked.append((after, len(journal.reads)))
            events, last = await ahead.page("s", after, journal.latest, limit)
            pages.append([seq for seq, _kind, _json in events])
            after = last
            await asyncio.sleep(0.01)  # the client takes the page in; the read ahead runs meanwhile
            between()
        return pages
    return asyncio.run(body())


def test_a_client_paging_through_gets_every_event_once_and_later_pages_were_read_ahead():
    journal = Journal(95)
    pages = page_through(PageReadAhead(journal.read), journal, 10)
    assert [seq for page in pages for seq in page] == list(range(1, 96))
    assert len(pages) == 10
    # One read per page, each started before the client asked for it (the first excepted).
    assert [after for after, _upto, _limit in journal.reads] == list(range(0, 100, 10))
    assert journal.asked == [(0, 0)] + [(after, after // 10 + 1) for after in range(10, 100, 10)]


def test_events_committed_after_a_page_was_read_ahead_are_added_up_to_the_limit():
    journal = Journal(25)
    ahead = PageReadAhead(journal.read)
    grown = iter([30, 0, 0, 0, 0, 0])
    pages = page_through(ahead, journal, 20, between=lambda: journal.commit(next(grown)))
    # Page 2 was read ahead as (20, 25]; 30 more came: it is filled up to the limit with 26-40.
    assert pages[0] == list(range(1, 21)) and pages[1] == list(range(21, 41))
    assert [seq for page in pages for seq in page] == list(range(1, 56))


def test_a_page_asked_with_another_cursor_or_limit_is_read_again_not_taken_from_the_read_ahead():
    async def body():
        journal = Journal(50)
        ahead = PageReadAhead(journal.read)
        await ahead.page("s", 0, journal.latest, 10)
        await asyncio.sleep(0.01)
        events, _ = await ahead.page("s", 5, journal.latest, 10)  # not the page read ahead (10, 20]
        assert [seq for seq, _, _ in events] == list(range(6, 16))
        events, _ = await ahead.page("s", 15, journal.latest, 5)
        assert [seq for seq, _, _ in events] == list(range(16, 21))
    asyncio.run(body())


def test_a_last_or_short_page_reads_nothing_ahead():
    async def body():
        journal = Journal(15)
        ahead = PageReadAhead(journal.read)
        await ahead.page("s", 0, journal.latest, 20)   # short: the client is caught up
        await ahead.page("s", 5, journal.latest, 10)   # full, but nothing beyond it
        await asyncio.sleep(0.01)
        assert len(journal.reads) == 2
    asyncio.run(body())


def test_large_pages_are_not_read_ahead(monkeypatch):
    monkeypatch.setattr(read_ahead, "PAGE_BYTES", 95)

    async def body():
        journal = Journal(50)
        ahead = PageReadAhead(journal.read)
        await ahead.page("s", 0, journal.latest, 10)  # 100 bytes of events
        await asyncio.sleep(0.01)
        assert len(journal.reads) == 1
    asyncio.run(body())


def test_a_read_ahead_nobody_asks_for_is_dropped(monkeypatch):
    monkeypatch.setattr(read_ahead, "KEEP_S", 0.02)

    async def body():
        journal = Journal(50)
        ahead = PageReadAhead(journal.read)
        await ahead.page("s", 0, journal.latest, 10)
        assert ahead._ahead
        await asyncio.sleep(0.05)
        assert not ahead._ahead
    asyncio.run(body())


def test_a_failed_read_ahead_is_read_again_and_the_error_reaches_the_caller_only_if_it_stays():
    async def body():
        journal = Journal(50)
        ahead = PageReadAhead(journal.read)
        await ahead.page("s", 0, journal.latest, 10)
        journal.fail = True
        await asyncio.sleep(0.01)  # the read ahead failed
        journal.fail = False
        events, _ = await ahead.page("s", 10, journal.latest, 10)
        assert [seq for seq, _, _ in events] == list(range(11, 21))
        journal.fail = True
        await asyncio.sleep(0.01)
        with pytest.raises(OSError):
            await ahead.page("s", 20, journal.latest, 10)
    asyncio.run(body())


def test_the_sandbox_holds_at_most_its_budget_read_ahead_across_sessions(monkeypatch):
    monkeypatch.setattr(read_ahead, "BUDGET_BYTES", 250)  # room for two pages of 100 bytes

    async def body():
        journal = Journal(50)
        ahead = PageReadAhead(journal.read)
        for session in ("a", "b", "c"):
            await ahead.page(session, 0, journal.latest, 10)
        await asyncio.sleep(0.01)
        assert sorted(ahead._ahead) == ["a", "b"]
        ahead.drop("a")                                # a's session went away: its bytes are free...
        await ahead.page("c", 0, journal.latest, 10)   # ...so c's next page is read ahead now
        assert sorted(ahead._ahead) == ["b", "c"] and ahead._held == 200
    asyncio.run(body())

"""The commit pipeline (domain/commits.py) on a fake writer: nothing is published before its
commit comes back, output that arrives during a commit coalesces into the next one, a
lifecycle event lands after the output before it, large reads are chunked, and a flood pauses
its reader until its output is committed. The writer thread and SQLite are not involved: the
sink below holds each tick until the test lets it commit."""
from __future__ import annotations

import asyncio

from session_supervisor.domain.commits import CHUNK_BYTES, SESSION_HIGH, CommitPipeline
from session_supervisor.domain.model.session import Session
from session_supervisor.domain.model.spec import normalize_spec
from session_supervisor.domain.ports import CommitOutcome

NOW = 1_700_000_000_000_000_000


class HeldSink:
    """The CommitSink port: every tick waits in ``ticks`` until ``commit_next`` answers it."""

    def __init__(self) -> None:
        self.ticks: list[tuple[list, object]] = []

    def submit(self, tick, done) -> None:
        self.ticks.append((tick, done))

    def run_in_writer(self, fn, done) -> None:
        done(fn(), None)

    def commit_next(self) -> list:
        tick, done = self.ticks.pop(0)
        done([CommitOutcome() for _ in tick])
        return tick


class Store:
    released = False
    journal = None  # the writer is a fake: nothing reaches a journal store

    def show_committed(self, views: dict, rolled_back) -> None:
        pass


class Reader:
    """The Pausable port of a process's output."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def pause_output(self) -> None:
        self.calls.append("pause")

    def resume_output(self) -> None:
        self.calls.append("resume")


def running_session(session_id: str = "ses-1") -> Session:
    session = Session.create(session_id, "sb-1", normalize_spec({"command": ["cat"]}), "", 1, NOW)
    session.begin_attempt("att-1", "initial", 1, NOW)
    session.record_started(4242, 0, NOW)
    return session


def topics(tick) -> list[str]:
    return [type(event).__name__ for _app, events, _snaps in tick for event in events]


def outputs(tick) -> list[bytes]:
    return [event.data for _app, events, _snaps in tick for event in events if type(event).__name__ == "Output"]


async def turns(n: int = 5) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def run(story):
    async def bounded():
        async with asyncio.timeout(10):
            await story()
    asyncio.run(bounded())


def test_nothing_is_published_or_acknowledged_before_its_commit_returns():
    async def story():
        sink, published = HeldSink(), []
        pipeline = CommitPipeline(sink, lambda: NOW, lambda app, agg, events: published.append(len(events)))
        store, session = Store(), running_session()
        pipeline.stage(store, session)
        flushed = asyncio.ensure_future(pipeline.flush(store))
        await turns()
        assert len(sink.ticks) == 1 and not flushed.done() and published == []
        sink.commit_next()
        await turns()
        assert flushed.done() and flushed.exception() is None and published == [3]
    run(story)


def test_output_written_during_a_commit_coalesces_into_one_event_of_the_next_commit():
    async def story():
        sink = HeldSink()
        pipeline = CommitPipeline(sink, lambda: NOW, lambda *_: None)
        store, session = Store(), running_session()
        pipeline.add_output(store, session, "stdout", b"first ", None)
        await turns()
        assert outputs(sink.ticks[0][0]) == [b"first "]
        for part in (b"a", b"b", b"c"):  # while the first commit is in flight
            pipeline.add_output(store, session, "stdout", part, None)
        pipeline.add_output(store, session, "stderr", b"!", None)
        await turns()
        assert len(sink.ticks) == 1  # one commit at a time
        sink.commit_next()
        await turns()
        assert outputs(sink.ticks[0][0]) == [b"abc", b"!"]  # one event per run of one stream
        sink.commit_next()
    run(story)


def test_a_lifecycle_event_lands_after_the_output_buffered_before_it():
    async def story():
        sink = HeldSink()
        pipeline = CommitPipeline(sink, lambda: NOW, lambda *_: None)
        store, session = Store(), running_session()
        pipeline.stage(store, session)
        await turns()
        sink.commit_next()
        pipeline.add_output(store, session, "stdout", b"last words", None)
        pipeline.materialize(session)  # what the attempt runner does before recording a fact
        session.record_exit(0, None, NOW)
        pipeline.stage(store, session)
        await turns()
        assert topics(sink.ticks[0][0]) == ["Output", "AttemptExited"]
        sink.commit_next()
    run(story)


def test_a_read_larger_than_a_chunk_is_committed_as_chunks_of_at_most_chunk_bytes():
    async def story():
        sink = HeldSink()
        pipeline = CommitPipeline(sink, lambda: NOW, lambda *_: None)
        store, session = Store(), running_session()
        data = bytes(range(256)) * (CHUNK_BYTES * 2 // 256 + 3)
        pipeline.add_output(store, session, "stdout", data, None)
        await pipeline_flush(pipeline, sink, store)
        chunks = [c for tick in sink.committed for c in outputs(tick)]
        assert b"".join(chunks) == data and max(map(len, chunks)) <= CHUNK_BYTES and len(chunks) == 3
    run(story)


def test_a_flood_pauses_its_reader_until_its_output_is_committed():
    async def story():
        sink = HeldSink()
        pipeline = CommitPipeline(sink, lambda: NOW, lambda *_: None)
        store, session, reader = Store(), running_session(), Reader()
        pipeline.add_output(store, session, "stdout", b"x" * (SESSION_HIGH + 1), reader)
        assert reader.calls == ["pause"]
        await pipeline_flush(pipeline, sink, store)
        assert reader.calls == ["pause", "resume"]
    run(story)


async def pipeline_flush(pipeline: CommitPipeline, sink: HeldSink, store) -> None:
    """Flush, committing every tick the sink receives meanwhile (kept in ``sink.committed``)."""
    sink.committed = []
    flushed = asyncio.ensure_future(pipeline.flush(store))
    while not flushed.done():
        await turns()
        while sink.ticks:
            sink.committed.append(sink.commit_next())
            await turns()
    await flushed


def test_a_lone_floods_full_chunks_become_events_while_a_commit_runs_and_land_once_in_order():
    async def story():
        sink = HeldSink()
        pipeline = CommitPipeline(sink, lambda: NOW, lambda *_: None)
        store, session, reader = Store(), running_session(), Reader()
        pipeline.add_output(store, session, "stdout", b"first", reader)
        await turns()
        assert len(sink.ticks) == 1  # a commit runs: what arrives now waits for the next tick
        chunks = [bytes([n]) * CHUNK_BYTES for n in range(1, 5)]
        for chunk in chunks:
            pipeline.add_output(store, session, "stdout", chunk, reader)
        made_early = [e.data for e in session.pending_events if type(e).__name__ == "Output"]
        assert made_early == chunks[:3]  # the full ones; the last may still grow
        await pipeline_flush(pipeline, sink, store)  # commits the tick in flight, then the rest
        landed = [c for tick in sink.committed for c in outputs(tick)]
        assert landed == [b"first", *chunks]
        assert pipeline._uncommitted_output == 0 and not pipeline._session_output  # every byte settled once
    run(story)

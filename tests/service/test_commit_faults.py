"""The write path when a store refuses a batch (issue 10), with the real pipeline, writer
thread and SQLite stores: the failure is never latched, it costs only its own store's
batch, the aggregate goes back to what is stored, and no seq is skipped or reused.

The poison here is planted on purpose (a value the codec refuses), because the edge now
refuses every such value before it reaches an aggregate.
"""
from __future__ import annotations

import asyncio
import time

import pytest

from session_supervisor.domain.commits import CommitPipeline
from session_supervisor.domain.model.errors import UnencodableEventError
from session_supervisor.domain.model.session import Session
from session_supervisor.domain.model.spec import normalize_spec
from session_supervisor.domain.sandbox_store import SandboxStore
from session_supervisor.infra.event_store import SqliteJournal
from session_supervisor.infra.writer import WriterThread

TOO_BIG = 2**70  # orjson refuses integers beyond 64 bits


def run(coro_fn):
    async def bounded():
        async with asyncio.timeout(30):
            return await coro_fn()
    return asyncio.run(bounded())


def new_session(store: SandboxStore, session_id: str) -> Session:
    session = Session.create(session_id, "sb-test", normalize_spec({"command": ["cat"]}), "", 1, time.time_ns())
    store.adopt(session)
    return session


def stored_versions(store: SandboxStore, session_id: str) -> list[int]:
    return [row.seq for row in store.journal.read_rows(session_id, 0, 10**9, 10**6)]


def test_an_unencodable_event_fails_its_own_batch_only_and_the_next_event_takes_the_next_stored_seq(tmp_path):
    async def story():
        writer = WriterThread(asyncio.get_running_loop())
        published = []
        pipeline = CommitPipeline(writer, time.time_ns, lambda app, agg, evs: published.append(
            (agg.id, [e.originator_version for e in evs])))
        poisoned_store = SandboxStore(SqliteJournal(tmp_path / "a"))
        other_store = SandboxStore(SqliteJournal(tmp_path / "b"))
        try:
            victim = new_session(poisoned_store, "ses-victim")
            neighbour = new_session(poisoned_store, "ses-neighbour")
            bystander = new_session(other_store, "ses-bystander")
            for store, session in ((poisoned_store, victim), (poisoned_store, neighbour), (other_store, bystander)):
                pipeline.stage(store, session)
            await pipeline.flush()
            assert victim.version == 1

            victim.accept_input("poison", "d" * 64, time.time_ns(), TOO_BIG)
            neighbour.accept_input("fine", "d" * 64, time.time_ns(), 1)
            bystander.accept_input("fine", "d" * 64, time.time_ns(), 1)
            for store, session in ((poisoned_store, victim), (poisoned_store, neighbour), (other_store, bystander)):
                pipeline.stage(store, session)
            poisoned, fine = await asyncio.gather(pipeline.flush(poisoned_store), pipeline.flush(other_store),
                                                  return_exceptions=True)
            assert isinstance(poisoned, UnencodableEventError) and fine is None

            assert victim.version == 1 and "poison" not in victim.receipts  # rolled back
            assert stored_versions(poisoned_store, "ses-neighbour") == [1, 2]  # same store, committed
            assert stored_versions(other_store, "ses-bystander") == [1, 2]

            victim.accept_input("after", "d" * 64, time.time_ns(), 1)
            pipeline.stage(poisoned_store, victim)
            await pipeline.flush(poisoned_store)  # not latched: the pipeline carries on
            assert stored_versions(poisoned_store, "ses-victim") == [1, 2]
            assert ("ses-victim", [2]) in published
            assert pipeline.faults.reasons() == {}
        finally:
            await pipeline.run_in_writer(poisoned_store.close)
            await pipeline.run_in_writer(other_store.close)
            await asyncio.to_thread(writer.close)
    run(story)


def test_a_session_whose_creation_cannot_be_encoded_is_forgotten_not_half_stored(tmp_path):
    async def story():
        writer = WriterThread(asyncio.get_running_loop())
        pipeline = CommitPipeline(writer, time.time_ns, lambda *_: None)
        store = SandboxStore(SqliteJournal(tmp_path / "a"))
        try:
            session = Session.create("ses-bad", "sb-test", {**normalize_spec({"command": ["cat"]}),
                                                            "name": "\udcff"}, "", 1, time.time_ns())
            store.adopt(session)
            pipeline.stage(store, session)
            with pytest.raises(UnencodableEventError):
                await pipeline.flush(store)
            assert "ses-bad" not in store.sessions and stored_versions(store, "ses-bad") == []
        finally:
            await pipeline.run_in_writer(store.close)
            await asyncio.to_thread(writer.close)
    run(story)


def test_a_read_only_or_full_store_is_a_507_and_any_other_refusal_a_503(tmp_path):
    import sqlite3

    from session_supervisor.domain.model.errors import InsufficientStorageError, StoreUnavailableError
    from session_supervisor.domain.store_faults import store_error

    path = tmp_path / "ro.sqlite"
    sqlite3.connect(path).execute("CREATE TABLE t (x)").connection.commit()
    read_only = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    with pytest.raises(sqlite3.OperationalError) as refused:
        read_only.execute("INSERT INTO t VALUES (1)")
    read_only.close()
    assert isinstance(store_error(refused.value), InsufficientStorageError)
    assert isinstance(store_error(OSError(28, "No space left on device")), InsufficientStorageError)
    assert isinstance(store_error(sqlite3.OperationalError("database is locked")), StoreUnavailableError)

"""The pause hook and the resume path in process: a real store and real processes (runtime host).

The hundred-cycle test prints the resume time of every tenth cycle (run with ``-s`` to see it);
flatness is asserted structurally instead: every resume rebuilds each aggregate from one
snapshot and an empty tail, however many cycles came before.
"""
from __future__ import annotations

from session_supervisor.api import commands

from tests.helpers import process_state, read_records

import asyncio
import contextlib
import signal
import sqlite3
import time

import pytest

from session_supervisor.domain.model.errors import UnavailableError
from session_supervisor.infra.bootstrap import Container
from session_supervisor.infra.settings import Settings

SLEEP = {"command": ["sleep", "600"]}
TIMEOUT_S = 100.0


def run(async_fn, timeout_s: float = TIMEOUT_S):
    async def bounded():
        async with asyncio.timeout(timeout_s):
            return await async_fn()
    return asyncio.run(bounded())


@contextlib.asynccontextmanager
async def started(data_dir, **adapters):
    container = Container(Settings(data_dir=data_dir, runtime="host"), **adapters)
    await container.start()
    try:
        yield container.manager
    finally:
        await container.stop()


def gone(pid: int) -> bool:
    return process_state(pid) in (None, "Z", "X")


async def wait_until(predicate, timeout_s: float = 10.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not predicate():
            await asyncio.sleep(0.005)


def store_shape(db) -> tuple[dict, dict]:
    """Per aggregate: events stored after its latest snapshot, and how many snapshots it has."""
    with contextlib.closing(sqlite3.connect(db)) as con:
        tails = dict(con.execute(
            "SELECT originator_id, SUM(originator_version > COALESCE((SELECT MAX(s.originator_version) "
            "FROM stored_snapshots s WHERE s.originator_id = e.originator_id), 0)) "
            "FROM stored_events e GROUP BY originator_id"))
        snapshots = dict(con.execute(
            "SELECT originator_id, COUNT(*) FROM stored_snapshots GROUP BY originator_id"))
    return tails, snapshots


async def new_sandbox(manager, sessions: int):
    sandbox = await manager.claim("default", {})
    runtime = manager.registry.runtime_for(sandbox.id)
    ids = [(await commands.create_session(runtime, SLEEP, ""))[0].id for _ in range(sessions)]
    return sandbox.id, ids


def pids_of(manager, sandbox_id: str, ids) -> list[int]:
    sessions = manager.registry.runtime_for(sandbox_id).store.sessions
    return [sessions[sid].attempt["pid"] for sid in ids]


def test_a_hundred_pause_resume_cycles_of_twenty_sessions_keep_every_attempt_and_no_process(tmp_path):
    cycles, resume_s, every_pid = 100, [], []

    async def body():
        async with started(tmp_path) as manager:
            sb, ids = await new_sandbox(manager, 20)
            db = manager.factory.checkpoints.dirs.state_dir(sb) / "journal.sqlite"
            for _ in range(cycles):
                pids = pids_of(manager, sb, ids)
                every_pid.extend(pids)
                await manager.transitions.pause(sb)
                assert [pid for pid in pids if not gone(pid)] == []
                tails, snapshots = store_shape(db)
                assert set(tails.values()) == {0} and set(snapshots.values()) == {1}
                started_at = time.perf_counter()
                await manager.transitions.resume(sb)
                resume_s.append(time.perf_counter() - started_at)
            assert manager.registry.sandbox(sb).runtime_generation == cycles + 1
            store = manager.registry.runtime_for(sb).store
            for sid in ids:
                records = await asyncio.to_thread(read_records, store, sid, 0,
                                                  store.committed_seq[sid], 10**6, True)
                assert_complete_history(records, cycles)
                assert [a["number"] for a in store.sessions[sid].attempts] == list(range(1, cycles + 2))
            every_pid.extend(pids_of(manager, sb, ids))
            await manager.transitions.delete(sb)
        assert [pid for pid in every_pid if not gone(pid)] == []

    run(body, timeout_s=110)
    tenth = [f"{1000 * resume_s[i]:.1f}" for i in range(0, cycles, 10)]
    print(f"\nresume ms, cycles 1,11,...,91: {tenth}; first 10 mean "
          f"{1000 * sum(resume_s[:10]) / 10:.1f} ms, last 10 mean {1000 * sum(resume_s[-10:]) / 10:.1f} ms")


def assert_complete_history(records: list[dict], cycles: int) -> None:
    starts = [(r["runtime_generation"], r["reason"]) for r in records if r["type"] == "attempt.starting"]
    exits = [(r["runtime_generation"], r["reason"]) for r in records if r["type"] == "attempt.exited"]
    assert starts == [(1, "created")] + [(g, "runtime_recovered") for g in range(2, cycles + 2)]
    assert exits == [(g, "runtime_replaced") for g in range(1, cycles + 1)]
    assert sum(r["type"] == "session.paused" for r in records) == cycles


def test_the_barrier_refuses_new_mutating_calls_while_reads_and_streams_go_on(tmp_path):
    async def body():
        async with started(tmp_path) as manager:
            sb, _ids = await new_sandbox(manager, 1)
            in_flight = await manager.transitions.admit(sb, mutating=True, streaming=False)
            pausing = asyncio.create_task(manager.transitions.pause(sb))
            await wait_until(lambda: manager.registry.gate(sb).barrier)
            with pytest.raises(UnavailableError, match="barrier"):
                await manager.transitions.admit(sb, mutating=True, streaming=False)
            with pytest.raises(UnavailableError, match="barrier"):  # a WebSocket upgrade
                await manager.transitions.admit(sb, mutating=True, streaming=True)
            (await manager.transitions.admit(sb, mutating=False, streaming=False)).release()
            assert await manager.transitions.admit(sb, mutating=False, streaming=True) is None  # SSE
            await asyncio.sleep(0.05)
            assert not pausing.done(), "the barrier waits for the call in flight"
            in_flight.release()
            await pausing
            assert manager.registry.sandbox(sb).status == "paused"

    run(body)


def test_a_ttl_pause_gives_way_to_a_session_call_before_it_commits(tmp_path):
    async def body():
        async with started(tmp_path) as manager:
            sb, ids = await new_sandbox(manager, 1)
            pid = pids_of(manager, sb, ids)[0]
            in_flight = await manager.transitions.admit(sb, mutating=True, streaming=False)
            pausing = asyncio.create_task(manager.transitions.pause(sb, automatic=True))
            await wait_until(lambda: manager.registry.gate(sb).barrier)
            access = asyncio.create_task(manager.transitions.admit(sb, mutating=True, streaming=False))
            await wait_until(lambda: manager.registry.gate(sb).cancel_requested)
            in_flight.release()
            await pausing
            (await access).release()
            assert (manager.registry.sandbox(sb).status, manager.registry.sandbox(sb).runtime_generation) == ("running", 1)
            assert process_state(pid) in ("S", "R") and pids_of(manager, sb, ids) == [pid]

    run(body)


def test_a_freeze_that_does_not_commit_is_thawed_on_the_same_attempt(tmp_path):
    async def body():
        async with started(tmp_path) as manager:
            sb, ids = await new_sandbox(manager, 1)
            runtime = manager.registry.runtime_for(sb)
            session = runtime.store.sessions[ids[0]]
            pid, attempt = session.attempt["pid"], session.attempt_id
            frozen = runtime.freeze(manager.clock.now_ns())
            await runtime.pipeline.flush()
            await wait_until(lambda: process_state(pid) == "T")
            assert session.phase == "paused"
            await runtime.thaw(frozen, manager.clock.now_ns())
            await wait_until(lambda: process_state(pid) in ("S", "R"))
            assert (session.phase, session.attempt_id) == ("running", attempt)
            os_kill_group(pid)

    run(body)


def os_kill_group(pid: int) -> None:
    import os
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def test_a_user_paused_sandbox_found_at_start_stays_paused_and_its_old_processes_are_reaped(tmp_path):
    reaped = []

    async def first():
        async with started(tmp_path) as manager:
            sb, ids = await new_sandbox(manager, 2)
            attempts = [manager.registry.runtime_for(sb).store.sessions[sid].attempt for sid in ids]
            await manager.transitions.pause(sb)
            return sb, sorted((a["pid"], a["start_time"]) for a in attempts)

    async def second():
        async with started(tmp_path, reap=lambda pid, start: reaped.append((pid, start))) as manager:
            sandbox = manager.registry.sandbox(sb)
            return sandbox.status, sandbox.runtime_generation, sb in manager.registry.running

    sb, recorded = run(first)
    assert run(second) == ("paused", 1, False)
    assert sorted(reaped) == recorded  # a crash after the manifest would have left them frozen

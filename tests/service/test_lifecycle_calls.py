"""Lifecycle calls through the whole server on a fake clock: ordering, failures, concurrency."""
from __future__ import annotations

import asyncio

import pytest

from session_supervisor.domain.model.commands import DeleteSession
from session_supervisor.domain.model.errors import AttemptRunningError, OperationFailedError, SessionNotFoundError
from session_supervisor.api import commands
from session_supervisor.api.journal_wire import json_rows
from tests.helpers import read_records
from tests.service.worlds import create, in_world, journal_types


def test_concurrent_replacements_run_one_after_the_other_and_never_two_processes(tmp_path):
    async def body(world):
        session = await create(world, "a")
        calls = [commands.create_attempt(world.runtime, session.id, {"replace_current": True}) for _ in range(3)]
        await asyncio.gather(*calls)
        await world.settle()
        assert [a["number"] for a in session.attempts] == [1, 2, 3, 4]
        assert len(world.runner.alive) == 1
        assert (await journal_types(world, "a")).count("attempt.exited:attempt_replaced") == 3
    in_world(tmp_path, body)


def test_a_call_waiting_behind_a_delete_finds_the_session_gone(tmp_path):
    async def body(world):
        session = await create(world, "a", lifecycle={"stop_grace_period_seconds": 5})
        world.process("a").ignore(15)
        deleting = asyncio.ensure_future(world.runtime.handle(DeleteSession(session.id)))
        await world.settle()
        updating = asyncio.ensure_future(commands.set_desired_state(world.runtime, session.id, {"state": "running"}))
        await world.advance(5)
        await deleting
        with pytest.raises(SessionNotFoundError):
            await updating
        assert world.runner.alive == []
    in_world(tmp_path, body)


def test_a_new_attempt_while_one_runs_conflicts_and_changes_nothing(tmp_path):
    async def body(world):
        session = await create(world, "a")
        with pytest.raises(AttemptRunningError):
            await commands.create_attempt(world.runtime, session.id, {})
        assert (session.spec_version, len(session.attempts)) == (1, 1)
    in_world(tmp_path, body)


def test_create_answers_with_a_failed_start_recorded_and_other_calls_raise_after_recording(tmp_path):
    async def body(world):
        world.runner.fail_next(1, "exec: no such file")
        session = await create(world, "a")
        assert (session.phase, session.attempt["reason"]) == ("failed", "start_failed")
        for call in (lambda: commands.set_desired_state(world.runtime, session.id, {"state": "running"}),
                     lambda: commands.create_attempt(world.runtime, session.id, {}),
                     lambda: commands.update_session(world.runtime, session.id, {"command": ["other"]})):
            world.runner.fail_next(1, "exec: no such file")
            with pytest.raises(OperationFailedError, match="no such file"):
                await call()
        assert [a["reason"] for a in session.attempts] == ["start_failed"] * 4
        assert (await journal_types(world, "a")).count("attempt.exited:start_failed") == 4
    in_world(tmp_path, body)


def test_desired_running_during_backoff_starts_once_and_the_timer_does_not_start_another(tmp_path):
    async def body(world):
        session = await create(world, "a", lifecycle={"restart": {"policy": "on_failure"}})
        world.process("a").exit(1)
        await world.settle()
        assert session.phase == "backoff"
        await commands.set_desired_state(world.runtime, session.id, {"state": "running"})
        await world.advance(10)
        assert [a["number"] for a in session.attempts] == [1, 2]
        assert session.attempt["id"] and session.phase == "running"
    in_world(tmp_path, body)


def test_stop_during_backoff_cancels_the_restart(tmp_path):
    async def body(world):
        session = await create(world, "a", lifecycle={"restart": {"policy": "always"}})
        world.process("a").exit(0)
        await world.settle()
        await commands.set_desired_state(world.runtime, session.id, {"state": "stopped"})
        await world.advance(10)
        assert (session.phase, len(session.attempts)) == ("stopped", 1)
    in_world(tmp_path, body)


def test_a_slow_stop_of_one_session_does_not_hold_up_calls_on_another(tmp_path):
    """The unit-level check (no timing): the other session's calls complete while the stop
    still waits on the fake clock. tests/api/test_lifecycle_api.py measures it for real."""
    async def body(world):
        slow = await create(world, "slow", lifecycle={"stop_grace_period_seconds": 30})
        other = await create(world, "other")
        world.process("slow").ignore(15)
        world.process("other").ignore(10)  # USR1 below is only there to be journaled
        stopping = asyncio.ensure_future(commands.set_desired_state(world.runtime, slow.id, {"state": "stopped"}))
        await world.settle()
        runtime = world.runtime
        await commands.write_input(runtime, other.id, {"input_id": "i1", "data_base64": "aGkK"})
        await commands.send_signal(runtime, other.id, {"signal": "USR1"})
        await runtime.journal.events_page(other.id, 0, 100, json_rows)
        await commands.create_attempt(runtime, other.id, {"replace_current": True})
        await commands.update_session(runtime, other.id, {"command": ["worker"], "name": "renamed"})
        assert runtime.session(other.id).attempt["number"] == 2
        assert not stopping.done() and slow.phase == "stopping"
        await world.advance(30)
        await stopping
        assert slow.phase == "stopped"
    in_world(tmp_path, body)


def test_restart_count_survives_a_server_restart(tmp_path):
    async def body(world):
        session_id = (await create(world, "a", lifecycle={"restart": {"policy": "on_failure"}})).id
        for _ in range(2):
            world.process("a").exit(1)
            await world.advance(1)
        assert world.session("a").restart_count == 2
        await world.drop(clean=True)
        await world.rebuild()
        await world.settle()
        session = world.runtime.session(session_id)
        assert (session.restart_count, session.phase) == (2, "running")
    in_world(tmp_path, body)


def test_delete_removes_the_stored_journal(tmp_path):
    async def body(world):
        session = await create(world, "a")
        store = world.runtime.store
        assert await asyncio.to_thread(read_records, store, session.id, 0, 10**6, 1000)
        await world.runtime.handle(DeleteSession(session.id))
        assert await asyncio.to_thread(read_records, store, session.id, 0, 10**6, 1000) == []
        with pytest.raises(SessionNotFoundError):
            world.runtime.session(session.id)
    in_world(tmp_path, body)

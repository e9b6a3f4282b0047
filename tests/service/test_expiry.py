"""Expiry (contract §6.14) through the whole server on a fake clock."""
from __future__ import annotations

import asyncio

from session_supervisor.api import commands
from tests.service.worlds import create, in_world, journal_types


def test_a_2s_lifetime_expires_at_2s_once_and_stops_with_session_expired(tmp_path):
    async def body(world):
        session = await create(world, "a", lifecycle={"max_lifetime_seconds": 2})
        await world.advance(1.9)
        assert session.phase == "running"
        await world.advance(0.1)
        events = await journal_types(world, "a")
        assert events.count("session.expired") == 1
        assert events[-3:] == ["session.expired", "attempt.stopping:session_expired",
                               "attempt.exited:session_expired"]
        assert (session.phase, session.desired_state, session.spec_version) == ("stopped", "stopped", 1)
        await world.advance(60)
        assert (await journal_types(world, "a")).count("session.expired") == 1
    in_world(tmp_path, body)


def test_one_slow_expiry_stop_does_not_hold_up_another_sessions_expiry(tmp_path):
    async def body(world):
        slow = await create(world, "slow", lifecycle={"max_lifetime_seconds": 1,
                                                      "stop_grace_period_seconds": 30})
        fast = await create(world, "fast", lifecycle={"max_lifetime_seconds": 1})
        world.process("slow").ignore(15)
        await world.advance(1)
        assert (slow.phase, fast.phase) == ("stopping", "stopped")
        assert fast.attempt["reason"] == "session_expired"
        await world.advance(30)
        assert slow.phase == "stopped" and slow.attempt["signal"] == 9
    in_world(tmp_path, body)


def test_sessions_loaded_after_a_restart_are_swept_too(tmp_path):
    async def body(world):
        session_id = (await create(world, "a", lifecycle={"max_lifetime_seconds": 10})).id
        await world.drop(clean=True)
        await world.rebuild()
        await world.advance(9.75)
        assert world.session("a").phase == "running"
        await world.advance(0.25)
        session = world.runtime.session(session_id)
        assert (session.phase, session.attempt["reason"]) == ("stopped", "session_expired")
        assert session.attempt["number"] == 2  # attempt 2 came from runtime recovery
    in_world(tmp_path, body)


def test_releasing_the_runtime_stops_the_sweep(tmp_path):
    async def body(world):
        sweep = world.runtime.expiry
        assert sweep.running
        await world.runtime.release()
        await asyncio.sleep(0)
        assert not sweep.running
        sweep.start()  # the next runtime starts it again
        assert sweep.running
    in_world(tmp_path, body)


def test_input_just_before_the_deadline_postpones_an_idle_expiry(tmp_path):
    async def body(world):
        session = await create(world, "a", lifecycle={"idle_timeout_seconds": 2})
        await world.advance(1.75)
        body_ = {"input_id": "i1", "data_base64": "aGkK"}
        await commands.write_input(world.runtime, session.id, body_)
        await world.advance(1.75)
        assert session.phase == "running"
        await world.advance(0.25)
        assert session.phase == "stopped"
    in_world(tmp_path, body)

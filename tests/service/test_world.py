"""The scenario World itself: it drops a server and rebuilds one over the same data dir."""
from __future__ import annotations

from tests.service.worlds import create, in_world, journal_types


def test_a_clean_drop_and_rebuild_recovers_the_session_as_attempt_2_of_generation_2(tmp_path):
    async def body(world):
        await create(world, "a")
        await world.drop(clean=True)
        assert world.runner.alive == []  # the orderly shutdown killed every process
        await world.rebuild()
        await world.settle()
        session = world.session("a")
        assert (session.generation, session.attempt["number"], session.phase) == (2, 2, "running")
        journal = await journal_types(world, "a")
        replaced = journal.index("attempt.exited:runtime_replaced")
        assert journal[replaced + 1] == "attempt.starting:runtime_recovered"
    in_world(tmp_path, body)


def test_a_crash_leaves_the_process_behind_and_the_next_server_reaps_it(tmp_path):
    async def body(world):
        first = await create(world, "a")
        pid = first.attempt["pid"]
        world.process("a").emit(b"staged but never committed?")
        await world.drop(clean=False)
        assert world.runner.by_pid(pid).alive  # nobody stopped it: the server died
        await world.rebuild()
        await world.settle()
        assert (pid, 0) in world.reaped
        session = world.session("a")
        assert (session.generation, session.attempt["number"]) == (2, 2)
    in_world(tmp_path, body)


def test_the_fake_clock_only_moves_when_advanced(tmp_path):
    async def body(world):
        before = world.clock.now_ns()
        await create(world, "a")
        await world.settle()
        assert world.clock.now_ns() == before
        await world.advance(1.5)
        assert world.clock.now_ns() - before == 1_500_000_000
    in_world(tmp_path, body)

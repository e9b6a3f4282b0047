"""Lifecycle calls interleaved at random, some abandoned by their caller half-way, on a real
store with real processes (runtime host): every change that was acknowledged is stored, the
sandbox aggregate's versions stay contiguous, and the next server start loads the sandbox.

Seeded: a failure names its seed, and ``SEED=<n> pytest -k interleav`` replays it.
"""
from __future__ import annotations

import asyncio
import contextlib
import os
import random
import sqlite3

from session_supervisor.api import commands
from session_supervisor.domain.model.errors import DomainError

from tests.service.test_pause_resume import run, started

SLEEP = {"command": ["sleep", "600"]}
SEEDS = [int(os.environ["SEED"])] if os.environ.get("SEED") else list(range(16))
OPS_PER_SEED = 24
RECONFIGURING = ("refresh", "ttl", "auto_resume", "network")


def stored_versions(db) -> list[tuple[int, str]]:
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)) as con:
        sandbox_id = db.parent.parent.name
        return con.execute("SELECT originator_version, topic FROM stored_events WHERE originator_id=? "
                           "ORDER BY originator_version", (sandbox_id,)).fetchall()


async def call(manager, sandbox_id: str, op: str, rng: random.Random):
    if op == "pause":
        return await manager.transitions.pause(sandbox_id)
    if op == "resume":
        return await manager.transitions.resume(sandbox_id)
    if op == "refresh":
        return await manager.transitions.refresh(sandbox_id, rng.randint(60, 3600))
    if op == "ttl":
        return await manager.transitions.update(sandbox_id, {"ttl": rng.randint(60, 3600)})
    if op == "auto_resume":
        return await manager.transitions.update(sandbox_id, {"auto_resume": rng.random() < 0.5})
    if op == "network":
        mode = rng.choice(("allow-all", "block-all"))
        return await manager.transitions.update(sandbox_id, {"network": {"mode": mode}})
    raise AssertionError(op)


async def one_round(manager, sandbox_id: str, rng: random.Random, tally: dict) -> None:
    """2-4 calls at once; each is abandoned (its task cancelled) with some probability."""
    ops = [rng.choice(("pause", "resume", *RECONFIGURING)) for _ in range(rng.randint(2, 4))]
    tasks = [asyncio.create_task(call(manager, sandbox_id, op, rng)) for op in ops]
    abandon = [rng.random() < 0.3 for _ in ops]
    await asyncio.sleep(rng.choice((0, 0.001, 0.005, 0.02)))
    for task, gives_up in zip(tasks, abandon):
        if gives_up:
            task.cancel()
    for op, task in zip(ops, tasks):
        try:
            await task
        except asyncio.CancelledError:
            tally["abandoned"] += 1
            if op in RECONFIGURING:
                tally["abandoned_reconfig"] += 1
            continue
        except DomainError as exc:  # refused (busy, barrier): then nothing may be stored
            tally["refused"] += 1
            tally.setdefault("why", set()).add(type(exc).__name__)
            continue
        if op in RECONFIGURING:
            tally["acked_reconfig"] += 1


def test_random_interleavings_of_lifecycle_calls_keep_every_acknowledged_change(tmp_path):
    for seed in SEEDS:
        rng = random.Random(seed)
        data = tmp_path / f"seed-{seed}"
        tally = {"acked_reconfig": 0, "abandoned_reconfig": 0, "abandoned": 0, "refused": 0}

        async def body():
            async with started(data) as manager:
                sandbox = await manager.claim("default", {})
                runtime = manager.registry.runtime_for(sandbox.id)
                for _ in range(2):
                    await commands.create_session(runtime, SLEEP, "")
                ops = 0
                while ops < OPS_PER_SEED:
                    await one_round(manager, sandbox.id, rng, tally)
                    ops += 3
                await manager.transitions.settle(10)
                return sandbox.id

        sandbox_id = run(body)
        db = data / "sandboxes" / sandbox_id / "state" / "journal.sqlite"
        versions = stored_versions(db)
        assert [v for v, _ in versions] == list(range(1, len(versions) + 1)), (seed, versions)
        reconfigured = sum(topic.endswith("Reconfigured") for _, topic in versions)
        assert tally["acked_reconfig"] <= reconfigured <= tally["acked_reconfig"] + tally["abandoned_reconfig"], \
            (seed, tally, versions)

        async def reopen_and_delete_amid_other_calls():
            async with started(data) as manager:
                assert manager.registry.sandbox(sandbox_id).status in ("running", "paused")
                ops = [rng.choice(("pause", "resume", *RECONFIGURING)) for _ in range(3)]
                others = [asyncio.create_task(call(manager, sandbox_id, op, rng)) for op in ops]
                await asyncio.sleep(rng.choice((0, 0.001, 0.01)))
                await manager.transitions.delete(sandbox_id)
                await asyncio.gather(*others, return_exceptions=True)  # after the delete: 404
                await manager.transitions.settle(10)
                assert not (data / "sandboxes" / sandbox_id).exists()
                assert sandbox_id not in manager.registry.running and sandbox_id not in manager.registry.parked
                assert sandbox_id not in manager.registry.gates
        run(reopen_and_delete_amid_other_calls)
        print(f"seed {seed}: {tally}, {len(versions)} sandbox versions")

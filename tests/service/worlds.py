"""Run a test body against a whole server built like ``sessiond serve`` (scenarios.world).

Fake mode: FakeClock + ScriptedRunner over the real store, writer thread and pipeline.
"""
from __future__ import annotations

from session_supervisor.api import commands

import asyncio
from pathlib import Path

from session_supervisor.scenarios.world import World

BASE_SPEC = {"command": ["worker"]}
TEST_TIMEOUT_S = 60.0


def in_world(tmp_path: Path, body, mode: str = "fake"):
    async def main():
        async with asyncio.timeout(TEST_TIMEOUT_S):
            world = await World.open(tmp_path, mode, BASE_SPEC)
            try:
                return await body(world)
            finally:
                await world.close()
    return asyncio.run(main())


def spec(**fields) -> dict:
    return {"command": ["worker"], **fields}


async def create(world: World, name: str, **fields):
    session, _created = await commands.create_session(world.runtime, spec(**fields), "")
    world.names[name] = session.id
    await world.settle()
    return session


async def journal_types(world: World, name: str) -> list[str]:
    return [r["type"] + (f":{r['reason']}" if r.get("reason") else "") for r in await world.journal(name)]

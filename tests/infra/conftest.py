"""Shared fixtures for the process runner tests.

Every runner test runs on both event loops the daemon may use (asyncio's
default and uvloop): their subprocess transports differ (pipes vs
socketpairs, delivery order of callbacks).
"""
from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections import defaultdict

import pytest
import uvloop

from tests.helpers import process_state  # noqa: F401  (re-exported to the runner tests)

LOOPS = {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}
TEST_TIMEOUT_S = 30.0
POLL_S = 0.01


@pytest.fixture(params=sorted(LOOPS))
def run(request):
    """run(async_fn) -> result, on a fresh loop of each kind, bounded by a timeout."""

    def _run(async_fn, timeout_s: float = TEST_TIMEOUT_S):
        async def bounded():
            async with asyncio.timeout(timeout_s):
                return await async_fn()

        with asyncio.Runner(loop_factory=LOOPS[request.param]) as runner:
            return runner.run(bounded())

    return _run


class Capture:
    """An OutputCallback that keeps everything, per stream."""

    def __init__(self) -> None:
        self.data: dict[str, bytearray] = defaultdict(bytearray)
        self.chunks = 0

    def __call__(self, stream: str, data: bytes) -> None:
        self.data[stream] += data
        self.chunks += 1

    def text(self, stream: str) -> str:
        return self.data[stream].decode(errors="replace")

    async def wait_for(self, stream: str, needle: bytes, timeout_s: float = 10.0) -> None:
        async with asyncio.timeout(timeout_s):
            while needle not in self.data[stream]:
                await asyncio.sleep(POLL_S)


async def wait_until(predicate, timeout_s: float = 10.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not predicate():
            await asyncio.sleep(POLL_S)


def is_alive(pid: int) -> bool:
    return process_state(pid) not in (None, "Z", "X")


@contextlib.asynccontextmanager
async def running(runner, launch, on_output):
    """Start a process and make sure its whole group is dead and reaped afterwards."""
    handle = await runner.start(launch, on_output)
    try:
        yield handle
    finally:
        handle.resume_output()
        handle.send_signal(signal.SIGKILL)
        async with asyncio.timeout(10):
            await handle.wait_exited()


def base_env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C"}

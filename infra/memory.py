"""Giving freed memory back to the system (glibc's ``malloc_trim``).

The server runs with a high ``MALLOC_TRIM_THRESHOLD_`` (api/__main__.py: ingest would otherwise
map and unmap a region per output chunk), so glibc keeps what Python frees for reuse. After a
large release (a context's or a sandbox's output, tens of MiB) that memory would stay in the
server's RSS for good; ``malloc_trim(0)`` hands whole free pages back (``MADV_DONTNEED``) in
every arena. It walks the heap, so it runs off the event loop, at most one at a time.
"""
from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging

from session_supervisor.domain.task_owner import TaskOwner

log = logging.getLogger(__name__)

TRIM_EVERY_S = 30.0  # the sweeps (a context's lifetime, retention) free memory on their own schedule


def _load_trim():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):  # not glibc (musl has no malloc_trim): nothing to hand back
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


_malloc_trim = _load_trim()


def trim_now() -> bool:
    """Hand free heap pages back to the system (blocking); False where glibc is not in use."""
    if _malloc_trim is None:
        return False
    _malloc_trim(0)
    return True


class MemoryTrimmer:
    """``release()`` after a large free; ``run()`` trims now and then for what the sweeps free."""

    def __init__(self) -> None:
        self._trim: asyncio.Future | None = None
        self._tasks = TaskOwner("memory trimmer")

    def release(self) -> None:
        if _malloc_trim is None or (self._trim is not None and not self._trim.done()):
            return
        self._trim = asyncio.ensure_future(asyncio.to_thread(trim_now))

    def start(self) -> None:
        self._tasks.every(TRIM_EVERY_S, self.release, "the periodic trim")

    async def stop(self) -> None:
        await self._tasks.close()
        if self._trim is not None:
            await asyncio.gather(self._trim, return_exceptions=True)

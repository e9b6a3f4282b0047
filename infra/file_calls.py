"""The file API's own threads, shared fairly between sandboxes.

Every blocking file call (a walk, a listing, a read or write chunk, a watch's set-up) runs on
this pool instead of asyncio's default executor, which claims, stores and the status walk
use: a tenant listing a 300,000-entry directory eight times over must not make another
tenant's ``files/stat`` (or a claim) wait. At most ``PER_SANDBOX`` calls of one sandbox run
at once, so one sandbox can take at most that many of the ``THREADS`` threads and its other
calls queue behind its own. A listing holds its page of names between its calls, so listings
have their own bound too, per sandbox and in all.

A call whose request went away keeps its slot until its thread is done: the bound counts
threads at work, not requests still waiting for them.
"""
from __future__ import annotations

import asyncio
import functools
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager

THREADS = 4
PER_SANDBOX = 2
LISTINGS_PER_SANDBOX = 1  # a listing's batches hold the GIL: one sandbox's listings go one at a time
LISTINGS = 4


class _Slots:
    """Named semaphores that exist only while someone holds or waits for them."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._slots: dict[str, tuple[asyncio.Semaphore, list[int]]] = {}

    async def acquire(self, key: str) -> None:
        semaphore, users = self._slots.setdefault(key, (asyncio.Semaphore(self.size), [0]))
        users[0] += 1
        try:
            await semaphore.acquire()
        except BaseException:
            self._leave(key)
            raise

    def release(self, key: str) -> None:
        self._slots[key][0].release()
        self._leave(key)

    def _leave(self, key: str) -> None:
        _semaphore, users = self._slots[key]
        users[0] -= 1
        if not users[0]:
            del self._slots[key]

    def __len__(self) -> int:
        return len(self._slots)


class FileCalls:
    def __init__(self, threads: int = THREADS, per_sandbox: int = PER_SANDBOX) -> None:
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="file-api")
        self._calls = _Slots(per_sandbox)
        self._listings = _Slots(LISTINGS_PER_SANDBOX)
        self._all_listings: asyncio.Semaphore | None = None

    async def run(self, sandbox_id: str, fn, *args, **kwargs):
        """``fn(*args, **kwargs)`` on the file threads, within the sandbox's share of them."""
        await self._calls.acquire(sandbox_id)
        try:
            future = asyncio.get_running_loop().run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))
        except BaseException:
            self._calls.release(sandbox_id)
            raise

        def done(finished: asyncio.Future) -> None:
            self._calls.release(sandbox_id)
            if not finished.cancelled():
                finished.exception()  # seen here too: its request may have gone away

        future.add_done_callback(done)
        return await asyncio.shield(future)

    @asynccontextmanager
    async def listing(self, sandbox_id: str):
        """Held for a whole listing (its names wait in memory between calls)."""
        if self._all_listings is None:
            self._all_listings = asyncio.Semaphore(LISTINGS)
        await self._listings.acquire(sandbox_id)
        try:
            async with self._all_listings:
                yield
        finally:
            self._listings.release(sandbox_id)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

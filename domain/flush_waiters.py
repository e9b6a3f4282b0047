"""Callers waiting for a durability point (``CommitPipeline.flush``): each waits for one store,
or for every store (None), and is answered once what it staged is committed or refused."""
from __future__ import annotations

import asyncio

Waiter = tuple[asyncio.Future, object]  # (future, store or None = every store)


class FlushWaiters:
    def __init__(self) -> None:
        self._waiting: list[Waiter] = []

    def __bool__(self) -> bool:
        return bool(self._waiting)

    def add(self, store) -> asyncio.Future:
        waiter = asyncio.get_running_loop().create_future()
        self._waiting.append((waiter, store))
        return waiter

    def wants_all(self) -> bool:
        return any(store is None for _, store in self._waiting)

    def take_all_but(self, held: set) -> list[Waiter]:
        """The waiters this tick answers; those on a store held for a retry keep waiting."""
        taken = [entry for entry in self._waiting if entry[1] not in held]
        self._waiting = [entry for entry in self._waiting if entry[1] in held]
        return taken

    def fail_store(self, store, error: BaseException) -> None:
        """Answer those waiting on ``store`` itself with ``error`` now (not those waiting on every
        store: a shutdown's flush is about what could be written)."""
        kept = []
        for waiter, on in self._waiting:
            if on is store:
                if not waiter.done():
                    waiter.set_exception(error)
            else:
                kept.append((waiter, on))
        self._waiting = kept

    def fail(self, store, error: BaseException) -> None:
        """Answer everyone waiting on ``store`` (and on every store) with ``error`` now."""
        kept = []
        for waiter, on in self._waiting:
            if on is None or on is store:
                if not waiter.done():
                    waiter.set_exception(error)
            else:
                kept.append((waiter, on))
        self._waiting = kept


def resolve(waiters: list[Waiter], errors: dict) -> None:
    """Answer waiters after a tick: the error of their store, else committed."""
    for waiter, store in waiters:
        if waiter.done():
            continue
        error = errors.get(store) if store is not None else next(iter(errors.values()), None)
        if error is None:
            waiter.set_result(None)
        else:
            waiter.set_exception(error)

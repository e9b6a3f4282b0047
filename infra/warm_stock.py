"""A bounded stock of one kind of thing a claim needs, made ahead: a network, cgroups, directories.

Each item is made fresh for exactly one sandbox and handed out once: a take removes it from the
stock for good, and nothing given back by a sandbox ever enters a stock (a deleted sandbox's
parts are destroyed as before). Items are made for a *shape* (what a template decides about them:
a disk's size, a network policy); the stock keeps ``size`` items of each of the few shapes claims
asked for most recently, so each template in use has its own.

Takes come from worker threads (the claim), fills from the pool's refill thread
(``infra.warm_pool``); every count is under one lock. Items of a shape no longer wanted and the
whole stock at ``drain`` are destroyed by whoever calls ``discard_unwanted`` / ``drain``.
"""
from __future__ import annotations

import logging
import threading
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Callable, Generic, Hashable, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")
MAX_SHAPES = 4  # templates kept warm at once: the ones claimed most recently


@dataclass
class StockCounts:
    """What /metrics shows of one stock."""

    ready: int = 0
    target: int = 0
    made: int = 0
    taken: int = 0
    missed: int = 0      # a claim found none of its shape and made its own
    discarded: int = 0   # made, never handed out (a shape no longer wanted, a stop)
    failed: int = 0      # a make that raised (the refill backs off)


class WarmStock(Generic[T]):
    def __init__(self, kind: str, size: int, make: Callable[[Hashable], T], destroy: Callable[[T], None],
                 shapes: tuple = ()) -> None:
        self.kind = kind
        self.size = size
        self._make = make
        self._destroy = destroy
        self._lock = threading.Lock()
        self._items: OrderedDict[Hashable, deque[T]] = OrderedDict()  # most recently wanted last
        self._unwanted: list[T] = []
        self._stopped = False
        self.counts = StockCounts()
        self.wake: Callable[[], None] = lambda: None  # set by the pool: a take asks for a refill
        for shape in shapes:
            self._want(shape)

    # ---- the claim's side -----------------------------------------------------------------
    def take(self, shape: Hashable, any_shape: bool = False) -> tuple[T, Hashable] | None:
        """An item made for ``shape`` (or, with ``any_shape``, for another one when none is ready:
        the caller adapts it), with the shape it was made for; None when the stock has none."""
        with self._lock:
            self._want(shape)
            found = self._items.get(shape)
            got = (found.popleft(), shape) if found else None
            if got is None and any_shape:
                for other, items in self._items.items():
                    if items:
                        got = (items.popleft(), other)
                        break
            if got is None:
                self.counts.missed += 1
            else:
                self.counts.taken += 1
        self.wake()
        return got

    def _want(self, shape: Hashable) -> None:
        """Under the lock: ``shape`` is the most recently wanted; the oldest beyond the bound go."""
        if shape in self._items:
            self._items.move_to_end(shape)
            return
        self._items[shape] = deque()
        while len(self._items) > MAX_SHAPES:
            _, items = self._items.popitem(last=False)
            self._unwanted.extend(items)

    # ---- the refill thread's side -----------------------------------------------------------
    def short(self) -> tuple[Hashable] | None:
        """``(shape,)`` of a shape with fewer than ``size`` items ready (the most recently wanted
        first; a shape may be None), or None when every shape is stocked."""
        with self._lock:
            if self._stopped:
                return None
            for shape in reversed(self._items):
                if len(self._items[shape]) < self.size:
                    return (shape,)
        return None

    def fill_one(self, shape: Hashable) -> None:
        """Make one item for ``shape`` (blocking) and stock it, unless it is no longer wanted."""
        try:
            item = self._make(shape)
        except Exception:
            with self._lock:
                self.counts.failed += 1
            raise
        with self._lock:
            self.counts.made += 1
            wanted = not self._stopped and shape in self._items and len(self._items[shape]) < self.size
            if wanted:
                self._items[shape].append(item)
                return
        self._discard(item)

    def discard_unwanted(self) -> None:
        with self._lock:
            doomed, self._unwanted = self._unwanted, []
        for item in doomed:
            self._discard(item)

    def drain(self) -> None:
        """Stop stocking and destroy everything in stock (the server stops)."""
        with self._lock:
            self._stopped = True
            doomed = self._unwanted + [item for items in self._items.values() for item in items]
            self._unwanted = []
            for items in self._items.values():
                items.clear()
        for item in doomed:
            self._discard(item)

    def _discard(self, item: T) -> None:
        try:
            self._destroy(item)
        except Exception:  # a server start removes whatever carries its tag
            log.exception("warm %s: an unused item could not be removed", self.kind)
        with self._lock:
            self.counts.discarded += 1

    def snapshot(self) -> StockCounts:
        with self._lock:
            ready = sum(len(items) for items in self._items.values())
            shapes = len(self._items)
            return StockCounts(ready=ready, target=self.size * shapes, made=self.counts.made,
                               taken=self.counts.taken, missed=self.counts.missed,
                               discarded=self.counts.discarded, failed=self.counts.failed)

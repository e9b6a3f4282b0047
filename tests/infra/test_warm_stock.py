"""A warm stock hands each item out once, keeps only the templates claimed most recently, and
destroys whatever it still holds when it is drained; its pool's refill thread keeps it full."""
from __future__ import annotations

import asyncio
import itertools
import threading

from session_supervisor.infra.warm_pool import WarmPool
from session_supervisor.infra.warm_stock import MAX_SHAPES, WarmStock

from tests.helpers import wait_for


class Maker:
    """Items are numbers, each made once; what was destroyed is remembered."""

    def __init__(self) -> None:
        self.counter = itertools.count()
        self.destroyed: list[int] = []
        self.lock = threading.Lock()

    def make(self, shape) -> tuple:
        with self.lock:
            return (shape, next(self.counter))

    def destroy(self, item) -> None:
        with self.lock:
            self.destroyed.append(item)


def filled(size: int, shapes=("a",)) -> tuple[WarmStock, Maker]:
    maker = Maker()
    stock = WarmStock("thing", size, maker.make, maker.destroy, shapes)
    while (short := stock.short()) is not None:
        stock.fill_one(short[0])
    return stock, maker


def test_threads_taking_at_once_never_get_the_same_item():
    stock, _ = filled(200)
    got: list = []
    lock = threading.Lock()

    def take_all():
        while (item := stock.take("a")) is not None:
            with lock:
                got.append(item[0])
    takers = [threading.Thread(target=take_all) for _ in range(8)]
    for taker in takers:
        taker.start()
    for taker in takers:
        taker.join(10)
    assert len(got) == 200 and len(set(got)) == 200
    assert stock.snapshot().missed == 8 and stock.snapshot().taken == 200


def test_a_take_of_another_shape_misses_unless_any_shape_will_do():
    stock, _ = filled(1)
    assert stock.take("b") is None
    item, shape = stock.take("b", any_shape=True)
    assert shape == "a" and item[0] == "a"


def test_only_the_shapes_wanted_most_recently_are_kept_and_the_others_are_destroyed():
    stock, maker = filled(1)
    for n in range(MAX_SHAPES):  # each new shape pushes the oldest out
        stock.take(f"s{n}")
    stock.discard_unwanted()
    assert maker.destroyed == [("a", 0)]
    assert stock.take("a") is None  # "a" is wanted again now
    assert stock.snapshot().target == MAX_SHAPES


def test_a_drained_stock_destroys_what_it_holds_and_stocks_nothing_more():
    stock, maker = filled(3)
    stock.drain()
    assert sorted(maker.destroyed) == [("a", 0), ("a", 1), ("a", 2)]
    assert stock.short() is None
    stock.fill_one("a")  # a make that was under way when the stop came
    assert maker.destroyed[-1] == ("a", 3) and stock.take("a") is None


def test_the_pool_refills_what_claims_take_and_removes_everything_at_stop():
    maker = Maker()
    stocks = [WarmStock(kind, 2, maker.make, maker.destroy, (None,)) for kind in ("net", "dir")]
    pool = WarmPool(stocks)
    pool.start()
    try:
        wait_for(lambda: all(s.snapshot().ready == 2 for s in stocks), timeout=10)
        assert stocks[0].take(None) is not None
        wait_for(lambda: stocks[0].snapshot().ready == 2 and stocks[0].snapshot().made == 3, timeout=10)
    finally:
        asyncio.run(pool.stop())
    assert len(maker.destroyed) == 4  # the two of each still in stock
    assert all(s.snapshot().ready == 0 for s in stocks)

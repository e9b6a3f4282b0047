"""The warm pool: what a claim needs, made ahead by one background thread.

A claim spends most of its time making things no client asked to wait for: a sandbox's disk
(mkfs, mount), its network namespace, veth pair and nftables chains, its cgroups, a uid and its
directories with an empty journal. Each adapter keeps a small stock of its own part
(``infra.warm_stock``): ``SandboxDirectories.create``, ``Cgroups.create`` and
``NetnsNetworks.attach`` take from it when it has one of the right shape and make their own as
before when not. This module only refills them.

The refill runs on one thread at a lower CPU priority (its children, mkfs, mount, ip and nft,
inherit it), one item at a time, round-robin over the stocks, so a burst of claims gets the CPU
first. A make that fails backs the refill off. Everything stocked carries the data dir's tag
(names under the tagged cgroup, namespaces named ``sessiond-<tag>-…``, directories under the data
dir), so a server started after a crash removes it with the rest; ``stop`` removes it at once.
"""
from __future__ import annotations

import asyncio
import logging
import os
import threading
from typing import Iterable

from .warm_stock import StockCounts, WarmStock

log = logging.getLogger(__name__)

REFILL_NICE = 10
REFILL_DELAY_S = 0.2
BACKOFF_S = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0)


class WarmPool:
    def __init__(self, stocks: Iterable[WarmStock]) -> None:
        self.stocks = [stock for stock in stocks if stock.size > 0]
        self._wake = threading.Event()
        self._stopping = False
        self._stopped = threading.Event()  # backoffs wait on this alone: takes do not cut them short
        self._thread: threading.Thread | None = None
        for stock in self.stocks:
            stock.wake = self._wake.set

    @property
    def enabled(self) -> bool:
        return bool(self.stocks)

    def start(self) -> None:
        if not self.stocks:
            return
        self._thread = threading.Thread(target=self._refill_forever, name="warm-pool", daemon=True)
        self._thread.start()
        self._wake.set()

    async def stop(self) -> None:
        """The refill ends (after the item it is making), then every stocked item is removed."""
        await asyncio.to_thread(self.halt)
        for stock in self.stocks:
            await asyncio.to_thread(stock.drain)

    def halt(self) -> None:
        """The refill ends after the item it is making, and what is stocked stays where it is, as
        a killed server leaves it (the scenarios' crash: the thread would outlive the "process")."""
        self._stopping = True
        self._stopped.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(120)

    def counts(self) -> dict[str, StockCounts]:
        return {stock.kind: stock.snapshot() for stock in self.stocks}

    # ---- the refill thread ------------------------------------------------------------------
    def _refill_forever(self) -> None:
        try:  # this thread only (a Linux thread is a task): the claims' threads keep their priority
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), REFILL_NICE)
        except OSError:
            pass
        failures = 0
        while not self._stopping:
            self._wake.wait()
            # A claim is followed at once by its first launch, which the refill's mkfs, mount, ip
            # and nft would slow down (CPU and the kernel's namespace and mount locks): start a
            # moment later. Not pushed back by the takes meanwhile, so a stream of claims still
            # gets refills.
            self._stopped.wait(REFILL_DELAY_S)
            self._wake.clear()
            while not self._stopping:
                for stock in self.stocks:
                    stock.discard_unwanted()
                pending = [(stock, shape) for stock in self.stocks if (shape := stock.short()) is not None]
                if not pending:
                    failures = 0
                    break
                try:
                    for stock, shape in pending:  # one item of each kind a round: a claim needs all
                        if self._stopping:
                            break
                        stock.fill_one(shape[0])
                    failures = 0
                except Exception:
                    delay = BACKOFF_S[min(failures, len(BACKOFF_S) - 1)]
                    failures += 1
                    log.exception("warm pool: making a unit failed; trying again in %.1f s", delay)
                    self._stopped.wait(delay)

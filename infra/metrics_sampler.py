"""Samples every running sandbox's cgroups and network counters at a fixed interval.

cgroups and interface counters hold only the current values, so a time series has to be sampled:
every ``interval`` seconds (``--metrics-interval``, 15 by default) one ``Sample`` per running
sandbox goes into a ring of the last ``RING`` samples (12 hours at 15 s), in memory. The workspace's
disk use is a walk of its tree, so it is sampled every ``DISK_EVERY``-th time only. Nothing is kept
across a restart: the series then shows a gap. A deleted sandbox's ring goes with it.
"""
from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import deque

from session_supervisor.domain.model.metrics import Sample
from session_supervisor.domain.task_owner import TaskOwner

log = logging.getLogger(__name__)

RING = 2880
DISK_EVERY = 4


def disk_usage(root: str) -> tuple[int, int]:
    """(allocated bytes, entries) of a directory tree, links not followed."""
    total = entries = 0
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
                entries += 1
            except OSError:
                pass  # removed while we walked
    return total, entries


class MetricsSampler:
    def __init__(self, manager, files, networks, interval_s: float) -> None:
        self.manager = manager
        self.files = files
        self.networks = networks
        self.interval_s = interval_s
        self.rings: dict[str, deque] = {}
        self.cpus = float(len(os.sched_getaffinity(0)) or os.cpu_count() or 1)
        self._tasks = TaskOwner("metrics sampler")
        self._ticks = 0
        self._disk: dict[str, tuple[int, int]] = {}

    def start(self) -> None:
        self._tasks.every(self.interval_s, self.sample_once, "sampling", now=True)

    async def stop(self) -> None:
        await self._tasks.close()

    def samples(self, sandbox_id: str) -> list[Sample]:
        return list(self.rings.get(sandbox_id, ()))

    async def sample_once(self) -> None:
        running = {sid: runtime for sid, runtime in self.manager.registry.running.items()}
        with_disk = self._ticks % DISK_EVERY == 0
        self._ticks += 1
        taken = await asyncio.to_thread(self._read, running, with_disk)
        for sandbox_id, sample in taken.items():
            ring = self.rings.get(sandbox_id)
            if ring is None:
                ring = self.rings[sandbox_id] = deque(maxlen=RING)
            ring.append(sample)
        known = set(self.manager.registry.running) | set(self.manager.registry.parked)
        for sandbox_id in [s for s in self.rings if s not in known]:  # deleted
            del self.rings[sandbox_id]
            self._disk.pop(sandbox_id, None)

    def _read(self, running: dict, with_disk: bool) -> dict[str, Sample]:
        out = {}
        for sandbox_id, runtime in running.items():
            try:
                stats = runtime.isolation.stats()
                traffic = self.networks.traffic(sandbox_id) or {}
                if with_disk or sandbox_id not in self._disk:
                    self._disk[sandbox_id] = disk_usage(self.files.workspace(sandbox_id))
            except Exception:
                log.exception("sandbox %s: metrics sample failed", sandbox_id)
                continue
            disk = self._disk[sandbox_id]
            out[sandbox_id] = Sample(
                at_ns=time.time_ns(), generation=runtime.generation, cpu_ns=stats.get("cpu_ns"),
                memory_usage=stats.get("container_memory_usage"),
                memory_working_set=stats.get("memory_working_set"), memory_limit=stats.get("container_memory_limit"),
                pids=stats.get("pids"), transmit_bytes=traffic.get("transmit_bytes"),
                receive_bytes=traffic.get("receive_bytes"), transmit_errors=traffic.get("transmit_errors"),
                receive_errors=traffic.get("receive_errors"), disk_bytes=disk[0], disk_inodes=disk[1])
        return out

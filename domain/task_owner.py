"""TaskOwner: every background task of one owner (a sandbox runtime, the registry, a sweep), and
their end with it.

``asyncio.TaskGroup`` would be the standard owner, but it is built for work that ends together:
the first failure cancels every sibling and its exit waits for all of them. A runtime's tasks are
independent and long-lived (an attempt's exit watcher, a restart timer, the expiry and retention
sweeps): one failing must be logged and must not end the others, and the runtime's end cancels
them all at once. So this owner does just that: ``spawn`` tracks a task until it ends and logs its
failure once (never silently lost, never raised into a sibling), ``every`` runs a periodic step
that survives its own failures, and ``close`` cancels what is left and waits for it, bounded.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable, Coroutine

log = logging.getLogger(__name__)

CLOSE_WAIT_S = 5.0


class TaskOwner:
    def __init__(self, owner: str) -> None:
        self.owner = owner  # named in the log line of a failed task
        self._tasks: set[asyncio.Task] = set()
        self._closed = False

    def __len__(self) -> int:
        return len(self._tasks)

    @property
    def closed(self) -> bool:
        return self._closed

    def spawn(self, coro: Coroutine, name: str = "", expected: tuple[type[BaseException], ...] = ()) -> asyncio.Task:
        """Run ``coro`` as a task of this owner; its failure is logged (unless it is one of the
        ``expected`` answers its awaiting caller gets anyway), its end forgotten."""
        if self._closed:
            coro.close()
            raise RuntimeError(f"{self.owner} has ended: no task may start")
        task = asyncio.get_running_loop().create_task(coro, name=name or None)
        self._tasks.add(task)
        task.add_done_callback(lambda done: self._finished(done, expected))
        return task

    def every(self, seconds: float, step: Callable[[], Awaitable[None] | None], name: str,
              sleep: Callable[[float], Awaitable[None]] = asyncio.sleep, now: bool = False) -> asyncio.Task:
        """Call ``step`` every ``seconds`` (on ``sleep``, so a fake clock drives it; ``now``: the
        first call at once) until the owner ends; a failed step is logged and the next one runs
        as planned."""
        async def loop() -> None:
            first = now
            while True:
                if not first:
                    await sleep(seconds)
                first = False
                try:
                    result = step()
                    if result is not None:
                        await result
                except Exception:
                    log.exception("%s: %s failed; it runs again in %.3g s", self.owner, name, seconds)
        return self.spawn(loop(), name)

    def _finished(self, task: asyncio.Task, expected: tuple[type[BaseException], ...]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None and not isinstance(task.exception(), expected):
            log.error("%s: background task %s failed", self.owner, task.get_name(), exc_info=task.exception())

    def cancel_all(self) -> list[asyncio.Task]:
        """No task of this owner goes on (it may still be unwinding: see ``close``)."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        return tasks

    async def wait(self, timeout_s: float) -> None:
        """Let the tasks running now finish (bounded), cancelling none."""
        current = asyncio.current_task()
        tasks = [task for task in self._tasks if task is not current]
        if tasks:
            await asyncio.wait(tasks, timeout=timeout_s)

    async def close(self, timeout_s: float = CLOSE_WAIT_S) -> None:
        """The owner's end: no new task, every task cancelled, and waited for (bounded)."""
        self._closed = True
        current = asyncio.current_task()
        tasks = [task for task in self.cancel_all() if task is not current]
        if tasks:
            await asyncio.wait(tasks, timeout=timeout_s)

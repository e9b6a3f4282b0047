"""Sandbox webhooks: what is owed to each sandbox's ``config.webhook``, put in the durable outbox.

- ``sandbox.ready``, ``.paused``, ``.resumed`` come from the sandbox's own record in its journal:
  its rows past the outbox's watermark are turned into deliveries and the watermark moved in one
  transaction. A commit of the record is a hint to look now; a sweep every second looks at every
  sandbox whose record changed since, so a delivery cut off by a crash between the journal's commit
  and the outbox's is found at the next start.
- ``sandbox.deleted``: the subscription (url and secret, kept in the outbox while the sandbox
  exists) outlives the sandbox; once the sandbox is gone (a DELETE, its hard ttl, whatever removed
  it) the sweep replaces the subscription by the delivery, in one transaction.
- ``process.started``, ``.exited``, ``.crashed``: a context's process (the hub tells).
- ``file.modified``: inotify on ``watch_dir`` of a running sandbox, recursive (repeats of the same
  change to the same path within half a second are one event, at most 50 a second per sandbox).

Nothing here is awaited by a sandbox's own work: every outbox write runs in a worker thread from a
task of its own.
"""
from __future__ import annotations

import asyncio
import logging
import time
import uuid

from session_supervisor.domain.commit_routing import CommitObserver
from session_supervisor.domain.model import webhooks as wh
from session_supervisor.domain.model.errors import DomainError
from session_supervisor.domain.model.timefmt import rfc3339
from session_supervisor.domain.observability_reader import LTE_MAX, ObservabilityReader
from session_supervisor.domain.task_owner import TaskOwner

from .webhook_delivery import Deliverer
from .webhook_outbox import Outbox, Subscription

log = logging.getLogger(__name__)

SWEEP_S = 1.0
FILE_REPEAT_S = 0.5
FILE_EVENTS_PER_S = 50
OUTBOX_NAME = "webhooks.sqlite"


class Webhooks(CommitObserver):
    def __init__(self, container) -> None:
        self.container = container
        self.manager = container.manager
        self.http_port = container.settings.port
        self.outbox = Outbox(str(container.settings.data_dir / OUTBOX_NAME))
        self.deliverer = Deliverer(self.outbox, container.settings.allow_local_webhooks)
        self.reader = ObservabilityReader(self.manager)
        self.subs: dict[str, Subscription] = {}
        self._seen: dict[str, int] = {}  # sandbox -> record version its deliveries were enqueued for
        self._locks: dict[str, asyncio.Lock] = {}
        self._watches: dict[str, tuple[int, asyncio.Task]] = {}
        self._tasks = TaskOwner("webhooks")

    async def start(self) -> None:
        self.subs = {s.sandbox_id: s for s in await asyncio.to_thread(self.outbox.subscriptions)}
        self.container.hub.process_listeners.append(self._on_process)
        self._spawn(self.deliverer.run())
        self._tasks.every(SWEEP_S, self.sweep, "the webhook sweep", now=True)

    async def stop(self) -> None:
        watches = [task for _, task in self._watches.values()]
        for task in watches:
            task.cancel()
        await self._tasks.close()
        await asyncio.gather(*watches, return_exceptions=True)
        await self.deliverer.close()
        await asyncio.to_thread(self.outbox.close)

    def _spawn(self, coro) -> asyncio.Task | None:
        if self._tasks.closed:  # stopped: a late hint (a context ending at shutdown) has nowhere to go
            coro.close()
            return None
        return self._tasks.spawn(coro)

    def _lock(self, sandbox_id: str) -> asyncio.Lock:
        return self._locks.setdefault(sandbox_id, asyncio.Lock())

    # ---- hints from the rest of the server ---------------------------------------------------------
    def sandbox_committed(self, sandbox_id: str) -> None:
        """The sandbox's record was committed (claim, pause, resume, update): look now."""
        if len(self._tasks):  # started, and not stopped
            self._spawn(self.reconcile(sandbox_id))

    def _on_process(self, sandbox_id: str, kind: str, details: dict) -> None:
        sub = self.subs.get(sandbox_id)
        if sub is not None:
            self._spawn(self._enqueue(sub, [self._delivery("evt_" + str(uuid.uuid4()), kind, time.time_ns(),
                                                           sub, details)]))

    # ---- the sandbox's record ------------------------------------------------------------------------
    async def reconcile(self, sandbox_id: str) -> None:
        try:
            wanted = bool(self.manager.registry.sandbox(sandbox_id).config.get("webhook"))
        except DomainError:
            wanted = False
        if not wanted and sandbox_id not in self.subs:
            return  # no subscription to make or to keep: nothing of this sandbox is kept here
        async with self._lock(sandbox_id):
            try:
                sandbox = self.manager.registry.sandbox(sandbox_id)
            except DomainError:
                return
            config = sandbox.config.get("webhook")
            if not config:
                return
            version = sandbox.version
            sub = Subscription(sandbox_id, config["url"], config.get("secret", ""), config.get("watch_dir", ""),
                               getattr(sandbox, "team_id", ""))
            if self.subs.get(sandbox_id) != sub:
                await asyncio.to_thread(self.outbox.subscribe, sub)
                self.subs[sandbox_id] = sub
            mark = await asyncio.to_thread(self.outbox.watermark, sandbox_id)
            async with self.reader.view(sandbox_id) as view:
                rows = await asyncio.to_thread(view.store.journal.read_rows, sandbox_id, 0, LTE_MAX, 100_000)
            owed = wh.record_deliveries(sandbox_id, rows, mark, self.http_port)
            if owed:
                deliveries = [self._delivery(event, kind, at, sub, payload) for _, event, kind, at, payload in owed]
                await self._enqueue(sub, deliveries, watermark=owed[-1][0])
            self._seen[sandbox_id] = version

    async def deleted(self, sandbox_id: str) -> None:
        async with self._lock(sandbox_id):
            sub = self.subs.get(sandbox_id)
            if sub is None:
                return
            try:
                self.manager.registry.sandbox(sandbox_id)
                return  # still there
            except DomainError:
                pass
            delivery = self._delivery(wh.deleted_event_id(sandbox_id), "sandbox.deleted", time.time_ns(), sub,
                                      {"reason": "pod_deleted"})
            await self._enqueue(sub, [delivery], unsubscribe=True)
            del self.subs[sandbox_id]
            self._seen.pop(sandbox_id, None)
        self._locks.pop(sandbox_id, None)

    def _delivery(self, event: str, kind: str, at_ns: int, sub: Subscription, payload: dict) -> tuple[str, str, bytes]:
        return event, kind, wh.body(event, kind, rfc3339(at_ns), sub.sandbox_id, payload, sub.team_id)

    async def _enqueue(self, sub: Subscription, deliveries: list, watermark: int | None = None,
                       unsubscribe: bool = False) -> None:
        added = await asyncio.to_thread(self.outbox.enqueue, sub, deliveries, time.time(), wh.RETRY_WINDOW_S,
                                        watermark, unsubscribe)
        if added < len(deliveries):
            log.warning("sandbox %s: %d webhook deliveries not queued (already there, or the outbox bound)",
                        sub.sandbox_id, len(deliveries) - added)
        self.deliverer.wake.set()

    # ---- the sweep ---------------------------------------------------------------------------------
    async def sweep(self) -> None:
        known = {**{sid: rt.store.sandbox for sid, rt in self.manager.registry.running.items()}, **self.manager.registry.parked}
        for sandbox_id, sandbox in known.items():
            if sandbox.config.get("webhook") and self._seen.get(sandbox_id) != sandbox.version:
                try:
                    await self.reconcile(sandbox_id)
                except Exception as exc:  # e.g. its store is being sealed right now: next sweep
                    log.debug("sandbox %s: webhook reconcile deferred: %s", sandbox_id, exc)
        for sandbox_id in [sid for sid in self.subs if sid not in known]:
            await self.deleted(sandbox_id)
        self._keep_file_watches()

    # ---- file.modified -----------------------------------------------------------------------------
    def _keep_file_watches(self) -> None:
        for sandbox_id, (generation, task) in list(self._watches.items()):
            runtime = self.manager.registry.running.get(sandbox_id)
            if runtime is None or runtime.generation != generation or task.done() or sandbox_id not in self.subs:
                task.cancel()
                del self._watches[sandbox_id]
        for sandbox_id, sub in self.subs.items():
            runtime = self.manager.registry.running.get(sandbox_id)
            if sub.watch_dir and runtime is not None and sandbox_id not in self._watches:
                task = asyncio.get_running_loop().create_task(self._watch_files(sandbox_id, sub))
                self._watches[sandbox_id] = (runtime.generation, task)

    async def _watch_files(self, sandbox_id: str, sub: Subscription) -> None:
        try:  # the server's one inotify instance, shared with the files API's watches
            watch = await self.container.watches.subscribe(self.container.file_calls,
                                                           self.container.sandbox_fs(sandbox_id), sandbox_id,
                                                           sub.watch_dir, True)
        except (OSError, DomainError):
            await asyncio.sleep(SWEEP_S)  # not there yet: the sweep tries again
            return
        last: dict[tuple[str, str], float] = {}
        window, count = time.monotonic(), 0
        try:
            async for label, path in watch.events():
                if label == "dropped":  # more than the watch's queue holds: the rest still come
                    continue
                now = time.monotonic()
                if now - last.get((label, path), -FILE_REPEAT_S) < FILE_REPEAT_S:
                    continue
                if now - window >= 1.0:
                    window, count = now, 0
                count += 1
                if count > FILE_EVENTS_PER_S:
                    continue
                last[(label, path)] = now
                if len(last) > 4096:
                    last.clear()
                delivery = self._delivery("evt_" + str(uuid.uuid4()), "file.modified", time.time_ns(), sub,
                                          {"event_type": label, "path": path})
                self._spawn(self._enqueue(sub, [delivery]))
        finally:
            watch.close()

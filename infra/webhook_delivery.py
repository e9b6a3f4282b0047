"""Drains the webhook outbox: at least once, with retries, never in the way of a sandbox.

One loop picks the rows that are due and sends each (up to ``CONCURRENCY`` at once, so a slow
receiver holds up only its own deliveries): resolve and check the URL (``webhook_targets``), POST
the stored body with its signature, 5 s timeout. A 2xx removes the row; a transport error, 429 or
5xx schedules it again with exponential backoff from 500 ms (plus up to 250 ms of jitter, capped at
30 s) for up to 24 hours; any other answer, a refused address or a row past its 24 hours is given up
with a warning. Rows are only ever removed after their answer, so a crash or kill -9 at any point
sends them again (receivers dedupe by ``event_id``).
"""
from __future__ import annotations

import asyncio
import logging
import random
import time

import httpx

from session_supervisor.domain.model.webhooks import retry_delay, retryable, signature

from .webhook_outbox import Delivery, Outbox
from .webhook_targets import RefusedTarget, check_url, own_addresses

log = logging.getLogger(__name__)

CONCURRENCY = 8
TIMEOUT_S = 5.0
IDLE_POLL_S = 1.0
OWN_ADDRESSES_TTL_S = 10.0


class Deliverer:
    def __init__(self, outbox: Outbox, allow_local: bool) -> None:
        self.outbox = outbox
        self.allow_local = allow_local
        self.wake = asyncio.Event()
        self._inflight: set[str] = set()
        self._slots = asyncio.Semaphore(CONCURRENCY)
        self._own: tuple[float, set[str]] = (0.0, set())
        self._client = httpx.AsyncClient(timeout=TIMEOUT_S, trust_env=False, follow_redirects=False)
        self._tasks: set[asyncio.Task] = set()

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._client.aclose()

    async def run(self) -> None:
        while True:
            try:
                due, upcoming = await asyncio.to_thread(self.outbox.due, time.time(), CONCURRENCY * 2,
                                                        set(self._inflight))
            except Exception:
                log.exception("webhook outbox could not be read")
                due, upcoming = [], None
            for delivery in due:
                self._inflight.add(delivery.event_id)
                task = asyncio.get_running_loop().create_task(self._send(delivery))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            wait = IDLE_POLL_S if upcoming is None else min(IDLE_POLL_S, max(0.02, upcoming - time.time()))
            self.wake.clear()
            try:
                await asyncio.wait_for(self.wake.wait(), wait)
            except asyncio.TimeoutError:
                pass

    def _own_addresses(self) -> set[str]:
        at, addresses = self._own
        if time.monotonic() - at > OWN_ADDRESSES_TTL_S:
            self._own = (time.monotonic(), own_addresses())
        return self._own[1]

    async def _send(self, delivery: Delivery) -> None:
        try:
            async with self._slots:
                await self._attempt(delivery)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("webhook %s: delivery failed unexpectedly; it is tried again", delivery.event_id)
            await asyncio.to_thread(self.outbox.retry, delivery.event_id, time.time() + retry_delay(
                delivery.attempts + 1, random.random()), "internal error")
        finally:
            self._inflight.discard(delivery.event_id)
            self.wake.set()

    async def _attempt(self, delivery: Delivery) -> None:
        if time.time() > delivery.give_up_at:
            log.warning("webhook %s (%s of %s) given up after 24 hours: %s", delivery.event_id, delivery.event_type,
                        delivery.sandbox_id, delivery.url)
            await asyncio.to_thread(self.outbox.delivered, delivery.event_id)
            return
        own = await asyncio.to_thread(self._own_addresses)
        try:
            target = await asyncio.to_thread(check_url, delivery.url, self.allow_local, own)
        except RefusedTarget as exc:
            log.warning("webhook %s of %s not sent: %s", delivery.event_id, delivery.sandbox_id, exc)
            await asyncio.to_thread(self.outbox.delivered, delivery.event_id)
            return
        headers = {"Content-Type": "application/json", "Host": target.host, "User-Agent": "sessiond-webhooks"}
        if delivery.secret:
            headers["X-Sandbox0-Signature"] = signature(delivery.secret, delivery.body)
        extensions = {"sni_hostname": target.sni} if target.sni else None
        status, error = None, ""
        try:
            answer = await self._client.post(target.url, content=delivery.body, headers=headers, extensions=extensions)
            status = answer.status_code
        except httpx.HTTPError as exc:
            error = f"{type(exc).__name__}: {exc}"
        if status is not None and 200 <= status < 300:
            await asyncio.to_thread(self.outbox.delivered, delivery.event_id)
        elif retryable(status, delivery.event_type):
            delay = retry_delay(delivery.attempts + 1, random.random())
            await asyncio.to_thread(self.outbox.retry, delivery.event_id, time.time() + delay,
                                    error or f"HTTP {status}")
        else:
            log.warning("webhook %s of %s refused by its receiver (HTTP %s): not sent again", delivery.event_id,
                        delivery.sandbox_id, status)
            await asyncio.to_thread(self.outbox.delivered, delivery.event_id)
